import QuakedCLI

await QuakedCommand.runAsRoot()
