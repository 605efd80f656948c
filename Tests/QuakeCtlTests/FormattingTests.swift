import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import Testing

@testable import QuakeCtl

@Suite struct FormattingTests {
    @Test func magnitudesPrintWithOneDecimal() {
        #expect(Formatting.magnitude(4.5) == "M 4.5")
        #expect(Formatting.magnitude(4) == "M 4.0")
        #expect(Formatting.magnitude(3.96) == "M 4.0")
        #expect(Formatting.magnitude(-0.04) == "M 0.0")
        #expect(Formatting.magnitude(nil) == "M ?")
    }

    /// oneDecimal works `%.1f` out with integers: it must give `String(format:)`'s bytes for any
    /// value, ties (0.25, 0.35 as stored) and values near them included.
    @Test func oneDecimalIsPrintfsRounding() {
        var values: [Double] = [
            0.05, 0.15, 0.25, 0.35, 0.45, 0.95, 2.675, 9.95, 99.95, 1e13 + 0.05, 99_999_999_999_999.95, 1e14, 1e15,
            -0.0, 0, -0.04, -0.05, -0.06, .nan, .infinity, -.infinity, .leastNonzeroMagnitude,
            .greatestFiniteMagnitude, 0.1.nextDown, 0.05.nextUp, 0.05.nextDown, 0.25.nextUp, 0.25.nextDown,
        ]
        for k in -4000...4000 {
            values += [Double(k) / 20, Double(k) / 100, Double(k) / 1000, (Double(k) / 20).nextUp, (Double(k) / 20).nextDown]
        }
        // A fixed sequence of random values, in magnitude's range and far beyond it.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state
        }
        for _ in 0..<50_000 {
            values.append(Double(Int64(bitPattern: next()) % 200_000) / 1000 + Double(next() % 1000) * 1e-9)
            values.append(Double(bitPattern: next()))
        }
        let wrong = values.filter { value in
            let printf = String(format: "%.1f", value)
            return Formatting.oneDecimal(value) != (printf == "-0.0" ? "0.0" : printf)
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(10))")
    }

    /// fit counts ASCII by bytes and anything else by characters, as before.
    @Test func fitCutsAndPadsByCharacters() {
        func reference(_ text: String, _ width: Int) -> String {
            if text.count > width { return String(text.prefix(max(width - 1, 0))) + "…" }
            return text + String(repeating: " ", count: width - text.count)
        }
        for text in ["", "abc", "12 km N of Benchtown", "Zürich", "a\r\nb", "a\rb", "🇯🇵 Tokyo", "e\u{301}tna", "tab\there"] {
            for width in 0...12 {
                #expect(Formatting.fit(text, width) == reference(text, width), "\(text.debugDescription) \(width)")
            }
        }
    }

    @Test(
        arguments: [
            (nil, ANSIColor.gray), (-0.5, .gray), (0, .green), (0.99, .green), (1, .yellow), (1.99, .yellow),
            (2, .orange), (2.99, .orange), (3, .red), (4.99, .red), (5, .purple), (8.1, .purple),
        ] as [(Double?, ANSIColor)])
    func magnitudeColoursFollowTheSampleApp(mag: Double?, color: ANSIColor) {
        #expect(Formatting.magnitudeColor(mag) == color)
    }

    @Test func relativeTimes() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let ms: (Double) -> Int = { Int((1_000_000 + $0) * 1000) }
        #expect(Formatting.relative(ms(0), now: now) == "just now")
        #expect(Formatting.relative(ms(-1), now: now) == "1 second ago")
        #expect(Formatting.relative(ms(-180), now: now) == "3 minutes ago")
        #expect(Formatting.relative(ms(-3600), now: now) == "1 hour ago")
        #expect(Formatting.relative(ms(-3 * 86_400), now: now) == "3 days ago")
        #expect(Formatting.relative(ms(300), now: now) == "in 5 minutes")
    }

    /// A row fits its relative time to 16 columns: a short time is padded, and a time too far
    /// off to fit is cut with an ellipsis, as `fit` cuts it.
    @Test(arguments: [-180.0, 1, 300, 5e14, -5e14])
    func rowsFitTheirRelativeTime(offset: Double) {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let time = Int((1_000_000 + offset) * 1000)
        let style = OutputStyle(colors: false)
        let row = Formatting.row(mag: 4.5, place: "Here", time: time, id: "us1", placeWidth: 12, style, now: now)
        let expected =
            Formatting.magnitudeColumn(4.5, style) + "  " + Formatting.fit("Here", 12) + "  "
            + Formatting.fit(Formatting.relative(time, now: now), 16) + "  us1"
        #expect(row == expected)
        if abs(offset) > 1e12 { #expect(Formatting.relative(time, now: now).count > 16 && row.contains("…")) }
    }

    @Test func absoluteTimes() throws {
        let utc = try #require(TimeZone(identifier: "UTC"))
        #expect(Formatting.absolute(1_763_780_220_000, timeZone: utc) == "2025-11-22 02:57:00 UTC")
    }

    @Test func counts() {
        #expect(Formatting.count(0) == "0")
        #expect(Formatting.count(999) == "999")
        #expect(Formatting.count(1234) == "1,234")
        #expect(Formatting.count(1_234_567) == "1,234,567")
        #expect(Formatting.earthquakes(1) == "1 earthquake")
        #expect(Formatting.earthquakes(1234) == "1,234 earthquakes")
    }

    @Test func coloursOnlyWhenEnabled() {
        let plain = OutputStyle(colors: false)
        let colored = OutputStyle(colors: true)
        #expect(plain.paint("M 4.5", .red) == "M 4.5")
        #expect(colored.paint("M 4.5", .red) == "\u{1B}[31mM 4.5\u{1B}[0m")
        #expect(!OutputStyle.detect(json: false, absoluteTimes: false, environment: ["NO_COLOR": "1"]).colors)
    }

    @Test func updateSummaryShowsWhatChanged() {
        let fields = [
            IOQuaked.FieldChange(field: "mag", old: .init(float: 4.1), new: .init(float: 3.9)),
            IOQuaked.FieldChange(field: "updated", old: .init(int: 1), new: .init(int: 2)),
            IOQuaked.FieldChange(field: "status", old: .init(string: "automatic"), new: .init(string: "reviewed")),
        ]
        #expect(ChangeText.fieldSummary(fields, OutputStyle()) == "M 4.1→3.9, status automatic→reviewed")
        #expect(ChangeText.fieldSummary([fields[1]], OutputStyle()) == "revised")
    }

    /// `watch` prints a catch-up's lines as bytes (``OutputBytes``); `list`, `show` and the tests
    /// make them as strings. The same functions write both: the bytes are the string's UTF-8,
    /// whatever the change, the place's characters, the colours, the unit or the time zone.
    @Test(arguments: [
        OutputStyle(), OutputStyle(colors: true),
        OutputStyle(absoluteTimes: true, timeZone: TimeZone(identifier: "Asia/Kolkata")!), OutputStyle(units: .mi),
    ])
    func changeLinesAsBytesAreTheStringsUTF8(style: OutputStyle) {
        var quake = IOQuaked.Quake(id: "us7000abcd", time: 1_799_999_000_000)
        quake.mag = 4.25
        quake.place = "12 km NNE of Reykjanesbær, Iceland — a place name long enough to be cut"
        quake.net = "us"
        let short = IOQuaked.Quake(id: "ci1", time: 1_799_000_000_000)
        let fields = [
            IOQuaked.FieldChange(field: "mag", old: .init(float: 4.1), new: .init(float: 4.25)),
            IOQuaked.FieldChange(field: "place", old: .init(string: "Ísafjörður"), new: .init(string: "8 km S of Vík")),
            IOQuaked.FieldChange(field: "depth", old: .init(float: 10), new: .init(float: 7.5)),
            IOQuaked.FieldChange(field: "updated", old: .init(int: 1), new: .init(int: 2)),
        ]
        let changes = [
            IOQuaked.Change(quakeId: quake.id, kind: .insert, quake: quake),
            IOQuaked.Change(quakeId: short.id, kind: .insert, quake: short),
            IOQuaked.Change(quakeId: "gone", kind: .insert),
            IOQuaked.Change(quakeId: quake.id, kind: .update, fields: fields, quake: quake),
            IOQuaked.Change(quakeId: quake.id, kind: .update, fields: [fields[3]]),
            IOQuaked.Change(quakeId: quake.id, kind: .delete, reason: .superseded, supersededBy: "us7000abce"),
            IOQuaked.Change(quakeId: quake.id, kind: .enter, fields: [fields[0]], quake: quake),
            IOQuaked.Change(quakeId: quake.id, kind: .leave, fields: [fields[0]]),
        ]
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        for change in changes {
            for before in [nil, quake] {
                let line = ChangeText.line(change, before: before, style, now: now)
                var bytes = OutputBytes()
                ChangeText.appendLine(change, before: before, style, now: now, to: &bytes)
                #expect(bytes.bytes == Array(line.utf8), "\(change.kind) before \(before == nil ? "unknown" : "known")")
                #expect(!line.isEmpty)
            }
        }
    }

    @Test func timeArguments() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let twoHours: Int? = TimeArgument.parse("2h", now: now)
        let week: Int? = TimeArgument.parse("1w", now: now)
        #expect(twoHours == Int(992_800_000))
        #expect(week == Int(395_200_000))
        #expect(TimeArgument.parse("2025-11-22", now: now) == 1_763_769_600_000)
        #expect(TimeArgument.parse("2025-11-22T02:57:00Z", now: now) == 1_763_780_220_000)
        #expect(TimeArgument.parse("1763780220000", now: now) == 1_763_780_220_000)
        #expect(TimeArgument.parse("yesterday", now: now) == nil)
    }

    @Test func socketPathFollowsTheDaemonsRule() {
        let none: @Sendable (String) -> Bool = { _ in false }
        #expect(
            SocketPath(environment: ["QUAKED_SOCKET": "/x/q.sock"], isRoot: false, fileExists: none).resolved
                == "/x/q.sock")
        #expect(
            SocketPath(environment: ["RUNTIME_DIRECTORY": "/run/a:/run/b"], isRoot: false, fileExists: none).resolved
                == "/run/a/quaked.sock")
        #expect(SocketPath(environment: [:], isRoot: true, fileExists: none).resolved == "/run/quaked/quaked.sock")
        #expect(
            SocketPath(environment: ["XDG_RUNTIME_DIR": "/run/user/7"], isRoot: false, fileExists: none).resolved
                == "/run/user/7/quaked/quaked.sock")
        #expect(
            SocketPath(environment: ["XDG_RUNTIME_DIR": "relative"], isRoot: false, fileExists: none).resolved
                == "/tmp/quaked-\(getuid())/quaked.sock")
        // A user without a daemon of their own finds the system daemon.
        let systemOnly: @Sendable (String) -> Bool = { $0 == SocketPath.systemSocket }
        #expect(
            SocketPath(environment: ["XDG_RUNTIME_DIR": "/run/user/7"], isRoot: false, fileExists: systemOnly).resolved
                == SocketPath.systemSocket)
    }
}

@Suite struct ExportFormatTests {
    static func quake() -> IOQuaked.Quake {
        var q = IOQuaked.Quake(id: "us1", time: 1_763_780_220_123)
        q.mag = 4.25
        q.place = "10 km SW of \"Foo\", CA"
        q.title = "line\r\nbreak"
        q.lon = -122.5
        q.lat = 37.25
        return q
    }

    @Test func csvFollowsRFC4180() {
        let writer = CSVExportWriter()
        var out: [UInt8] = []
        writer.header(into: &out)
        writer.quake(Self.quake(), index: 0, into: &out)
        let text = String(decoding: out, as: UTF8.self)
        let lines = text.components(separatedBy: "\r\n")
        // Every field but contributors (an array of solutions: ndjson and geojson carry it).
        #expect(lines[0] == QuakeFields.names.filter { $0 != "contributors" }.joined(separator: ","))
        #expect(lines[1].hasPrefix(#"us1,4.25,"10 km SW of ""Foo"", CA",2025-11-22T02:57:00.123Z,,"#))
        #expect(text.contains("\"line\r\nbreak\""))
        #expect(text.hasSuffix("\r\n"))
    }

    @Test func ndjsonIsTheInterfacesQuake() throws {
        var out: [UInt8] = []
        NDJSONExportWriter().quake(Self.quake(), index: 0, into: &out)
        #expect(out.last == 10)
        let decoded = try JSONDecoder().decode(IOQuaked.Quake.self, from: Data(out))
        #expect(decoded == Self.quake())
    }

    @Test func geojsonIsAFeatureCollection() throws {
        let writer = GeoJSONExportWriter()
        var out: [UInt8] = []
        writer.header(into: &out)
        writer.quake(Self.quake(), index: 0, into: &out)
        var noPlace = IOQuaked.Quake(id: "xx2", time: 5)
        noPlace.depth = nil
        writer.quake(noPlace, index: 1, into: &out)
        writer.footer(into: &out)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(out)) as? [String: Any])
        #expect(object["type"] as? String == "FeatureCollection")
        let features = try #require(object["features"] as? [[String: Any]])
        #expect(features.count == 2)
        #expect(features[0]["id"] as? String == "us1")
        let geometry = try #require(features[0]["geometry"] as? [String: Any])
        #expect(geometry["coordinates"] as? [Any] as? NSArray == [-122.5, 37.25, NSNull()] as NSArray)
        #expect(features[1]["geometry"] is NSNull)
        let properties = try #require(features[0]["properties"] as? [String: Any])
        #expect(properties["time"] as? Int == 1_763_780_220_123)
        #expect(properties["id"] == nil)
    }
}
