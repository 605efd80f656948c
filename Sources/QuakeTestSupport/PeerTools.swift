import Foundation

/// The independent Varlink peers the protocol tests talk to quaked with, as
/// `scripts/install-deps` installs them.
public enum PeerTools {
    /// `.build/test-venv`: the virtualenv `scripts/install-deps` puts the Python package
    /// `varlink` in (Debian has no package for it and forbids pip installs into the system).
    public static var testVenv: URL {
        Fixtures.packageRoot.appendingPathComponent(".build/test-venv")
    }

    /// The Python interpreter that can `import varlink`: the project's venv when it exists,
    /// else `python3` from PATH (a machine with `varlink` installed some other way). Run it
    /// through `/usr/bin/env`, which takes both a path and a bare name:
    /// `ChildProcess.run("/usr/bin/env", [PeerTools.python, "-m", "varlink.cli", ...])`.
    public static var python: String {
        let venvPython = testVenv.appendingPathComponent("bin/python3").path
        return FileManager.default.isExecutableFile(atPath: venvPython) ? venvPython : "python3"
    }

    /// `Tests/GoClient/build.sh`: builds the Go client, generated from the current
    /// `io.quaked.varlink`, as `OUTDIR/quaked-go-client`; quiet on success. Run it as
    /// `ChildProcess.run("/bin/bash", [PeerTools.goClientBuildScript, outputDirectory.path])`.
    public static var goClientBuildScript: String {
        Fixtures.packageRoot.appendingPathComponent("Tests/GoClient/build.sh").path
    }

    /// Where `goClientBuildScript` puts the client when given `outputDirectory`. The client
    /// takes `--socket PATH` (and `--feed NAME` for Refresh), prints one JSON line
    /// `{"calls":N,"ok":[...],"errors":[...],"skipped":[...],"seen":{...}}` and exits 0 only
    /// when every reply decoded and no unexpected error came.
    public static func goClient(in outputDirectory: URL) -> String {
        outputDirectory.appendingPathComponent("quaked-go-client").path
    }
}
