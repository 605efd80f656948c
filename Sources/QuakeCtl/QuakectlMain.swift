import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// The entry point (called by main.swift): parses, runs, and turns failures into one sentence on
/// stderr and a `sysexits(3)` exit code.
public enum QuakectlMain {
    public static func run() async {
        // A reader that goes away (`quakectl list | head`) ends the output, not the process.
        signal(SIGPIPE, SIG_IGN)
        let command: any ParsableCommand
        do {
            command = try QuakectlCommand.parseAsRoot(GlobalOptions.reorder(Array(CommandLine.arguments.dropFirst())))
        } catch {
            QuakectlCommand.exit(withError: error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var command = command
                try command.run()
            }
        } catch  where Self.isArgumentParserError(error) {
            // Help, usage errors and exit codes (the parser's own `help` returns a command
            // whose run throws the help request).
            QuakectlCommand.exit(withError: error)
        } catch {
            let failure = QuakectlError.from(error)
            Console.err("quakectl: \(failure.message)\n")
            exit(failure.exitCode)
        }
    }

    static func isArgumentParserError(_ error: any Error) -> Bool {
        error is ExitCode || error is CleanExit || error is ValidationError
            || String(reflecting: type(of: error)).hasPrefix("ArgumentParser.")
    }
}
