/// The options every command takes (``ClientOptions``) may also come before the command:
/// `quakectl --socket PATH list` is `quakectl list --socket PATH`.
///
/// ArgumentParser reads a subcommand's options only after the subcommand's name, so the
/// arguments are reordered before parsing: global options in front of the first argument that is
/// not one are moved behind it. Anything else in front (`--help`, `--version`, an unknown option)
/// stops the reordering, so the parser reports it as it always would.
enum GlobalOptions {
    /// The global options and whether each takes a value.
    static let options: [String: Bool] = ["--socket": true, "--host": true, "--json": false, "--absolute": false]

    static func reorder(_ arguments: [String]) -> [String] {
        var globals: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            guard let takesValue = options[name] else { break }
            globals.append(argument)
            index += 1
            if takesValue && !argument.contains("=") {
                guard index < arguments.endIndex else { return arguments }  // let the parser complain
                globals.append(arguments[index])
                index += 1
            }
        }
        guard !globals.isEmpty, index < arguments.endIndex, !arguments[index].hasPrefix("-") else { return arguments }
        return [arguments[index]] + globals + arguments[(index + 1)...]
    }
}
