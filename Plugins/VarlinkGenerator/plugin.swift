import Foundation
import PackagePlugin

/// Generates Swift types from every `.varlink` interface file in a target, at build time, with
/// `varlink-swift-gen` (the way protoc plugins and varlink-go's generator work): the interface
/// file is the one source, and the types can never drift from it.
@main
struct VarlinkGenerator: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let tool = try context.tool(named: "varlink-swift-gen")
        return target.sourceFiles(withSuffix: "varlink").map { file in
            let output = context.pluginWorkDirectoryURL.appending(
                path: file.url.deletingPathExtension().lastPathComponent + ".swift")
            var arguments = [file.url.path, output.path]
            // The runtime's own interface (org.varlink.service) is generated into the runtime.
            if target.name == "Varlink" { arguments += ["--runtime-module", "-"] }
            return .buildCommand(
                displayName: "Generating Swift types from \(file.url.lastPathComponent)",
                executable: tool.url, arguments: arguments, inputFiles: [file.url], outputFiles: [output])
        }
    }
}
