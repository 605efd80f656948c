import QuakeCtl

await QuakectlMain.run()
