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
            command = try QuakectlCommand.parseAsRoot()
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
        } catch let error as ExitCode {
            QuakectlCommand.exit(withError: error)
        } catch let error as CleanExit {
            QuakectlCommand.exit(withError: error)
        } catch let error as ValidationError {
            QuakectlCommand.exit(withError: error)
        } catch {
            let failure = QuakectlError.from(error)
            Console.err("quakectl: \(failure.message)\n")
            exit(failure.exitCode)
        }
    }
}
