// varlink-swift-gen: Swift types from a Varlink interface file.
//
//     varlink-swift-gen INPUT.varlink OUTPUT.swift [--namespace NAME] [--runtime-module MODULE]
//
// Run by the VarlinkGenerator build-tool plugin for every .varlink file in a target.
import Foundation
import VarlinkIDL

var arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, in arguments: inout [String]) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(i...(i + 1)) }
    return arguments[i + 1]
}
let namespace = option("--namespace", in: &arguments)
let runtimeModule = option("--runtime-module", in: &arguments) ?? "Varlink"
guard arguments.count == 2 else {
    FileHandle.standardError.write(
        Data("usage: varlink-swift-gen INPUT.varlink OUTPUT.swift [--namespace NAME] [--runtime-module MODULE]\n".utf8))
    exit(64)
}
let input = URL(fileURLWithPath: arguments[0])
do {
    let text = try String(contentsOf: input, encoding: .utf8)
    let interface: VarlinkInterface
    do {
        interface = try VarlinkInterface(parsing: text)
    } catch {
        FileHandle.standardError.write(Data("\(input.path):\(error.line):\(error.column): error: \(error.message)\n".utf8))
        exit(65)
    }
    let source = SwiftGenerator(
        interface: interface, text: text, namespace: namespace ?? SwiftGenerator.defaultNamespace(interface.name),
        runtimeModule: runtimeModule == "-" ? nil : runtimeModule, sourceName: input.lastPathComponent
    ).generate()
    let output = URL(fileURLWithPath: arguments[1])
    // Unchanged output keeps its timestamp, so nothing downstream rebuilds.
    if (try? String(contentsOf: output, encoding: .utf8)) != source {
        try source.write(to: output, atomically: true, encoding: .utf8)
    }
} catch {
    FileHandle.standardError.write(Data("varlink-swift-gen: \(error)\n".utf8))
    exit(1)
}
