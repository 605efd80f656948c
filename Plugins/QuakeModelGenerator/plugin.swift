import Foundation
import PackagePlugin

/// Generates, at build time, the Swift each layer needs of the quake record from its one
/// declaration (QuakeModel's `QuakeRecord.fields`), with `quake-model-gen`: the feed's structs and
/// key table (QuakeFeed), the store's column binding and row mapping (QuakeStore), io.quaked's
/// Quake to and from them (QuakeProtocol). The declaration is compiled into the tool, so a change
/// to it rebuilds the tool and so the generated files.
@main
struct QuakeModelGenerator: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let tool = try context.tool(named: "quake-model-gen")
        let output = context.pluginWorkDirectoryURL.appending(path: "\(target.name)+QuakeRecord.swift")
        let declaration = context.package.directoryURL.appending(path: "Sources/QuakeModel/QuakeRecord.swift")
        return [
            .buildCommand(
                displayName: "Generating \(target.name)'s quake record code",
                executable: tool.url, arguments: [target.name, output.path], inputFiles: [declaration, tool.url],
                outputFiles: [output])
        ]
    }
}
