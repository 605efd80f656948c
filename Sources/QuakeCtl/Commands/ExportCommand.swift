import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl export`: the whole store, streamed from one consistent read.
public struct ExportCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the stored earthquakes (all, or those the filters select) as CSV, GeoJSON, NDJSON, an SVG map or KML.",
        discussion: """
            The export is one consistent read of the store (quaked's Snapshot), streamed in pages: \
            memory stays constant however large the store, and imports go on meanwhile. The GeoJSON \
            is a FeatureCollection that quaked imports back unchanged. With -o the file appears \
            only when complete.

            --format svg draws one map: the world's coastlines (Natural Earth 1:110m), or the \
            region of --box, --near or --region, a circle per quake scaled by magnitude in the \
            colours of list, a legend, the count and the time span. --format kml writes a KML 2.2 \
            document, a Placemark per quake with its fields, for Google Earth and QGIS. Both \
            stream in constant memory, as the other formats do; times are UTC.
            """)

    @OptionGroup public var options: ClientOptions

    @OptionGroup(title: "Filters") public var filters: FilterOptions

    @Option(help: ArgumentHelp("The output format.", valueName: "format"))
    public var format: ExportFormat

    @Option(
        name: [.short, .customLong("output")],
        help: ArgumentHelp("Write to this file instead of stdout.", valueName: "file"))
    public var output: String?

    @Option(help: .hidden)
    public var pageSize: Int = 500

    public init() {}

    public func validate() throws {
        _ = try filters.viewport(of: try filters.filter())
    }

    public func run() async throws {
        let filter = try filters.filter()
        let style = options.style
        let progress = ProgressLine(enabled: style.progress && !options.json)
        let sink = try ExportSink(path: output)
        let writer = format.writer(viewport: try filters.viewport(of: filter) ?? .world, title: filters.mapTitle)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 20)
        var count = 0
        do {
            try await options.withConnection { connection in
                // About: with a filter, the count is of every stored quake.
                let total = progress.enabled ? try await connection.status().quakeCount : 0
                writer.header(into: &buffer)
                for try await page in try await connection.snapshot(pageSize: pageSize, filter: filter) {
                    for quake in page.quakes {
                        writer.quake(quake, index: count, into: &buffer)
                        count += 1
                    }
                    try sink.write(&buffer)
                    progress.show("Exported \(Formatting.count(count)) of about \(Formatting.earthquakes(total))…")
                }
                writer.footer(into: &buffer)
                try sink.write(&buffer)
            }
            try sink.finish()
        } catch {
            progress.clear()
            sink.abandon()
            throw error
        }
        progress.clear()
        if progress.enabled || output != nil && !options.json {
            Console.err("Exported \(Formatting.earthquakes(count)) (\(Formatting.bytes(sink.bytesWritten))).\n")
        }
    }
}
