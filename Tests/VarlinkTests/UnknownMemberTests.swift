import Logging
import NIOCore
import NIOEmbedded
import QuakeProtocol
import Testing

@testable import Varlink

/// Varlink's evolution rule: an interface may gain optional fields, so a client skips reply
/// members its generated types do not declare (as the Python client and varlink-go do), at any
/// depth, while a server still refuses a call parameter it does not declare (InvalidParameter).
@Suite("Unknown members: skipped in replies, refused in calls")
struct UnknownMemberTests {
    /// Unknown values of every JSON shape, each written as a newer server might send it.
    static let unknownValues: [String] = [
        "1", "-2.5e-3", "true", "null", #""plain""#,
        // A string with escaped quotes, braces and brackets, a backslash, \u escapes and a pair.
        #""a \"}\" {[ ] \\ \/ \u00e9 \ud83c\udf0b \"{\"x\":1}""#,
        // Nested objects and arrays, with strings that look like structure.
        #"{"a":{"b":[1,{"c":"}"}],"d":{}},"e":[],"f\"g":"]"}"#,
        #"[1,[2,{"x":"]"}],"\"{",{},[[]],null,false]"#,
        "[]", "{}",
    ]

    /// A FetchHistory reply with `extra` inserted as an unknown member (named `name`) at every
    /// level: the reply itself, a transaction (a struct in an array), a change (an array
    /// element in a struct's array), its quake (a struct in a struct) and a field change's value.
    static func historyReply(_ name: String, _ extra: String) -> String {
        let member = #""\#(name)":\#(extra)"#
        return #"""
            {\#(member),"storeId":"s","headToken":9,"oldestToken":0,"transactions":[{"token":9,\#(member),"author":"import","timestamp":5,"inserted":0,"updated":1,"deleted":0,"changes":[{"quakeId":"q","kind":"update",\#(member),"fields":[{"field":"mag","new":{"float":4.5,\#(member)},\#(member)}],"quake":{"id":"q","mag":4.5,"time":7,\#(member),"place":"Somewhere"}}]}],"hasMore":false,"nextAfter":9,\#(member)}
            """#
    }

    static let expectedHistory = IOQuaked.FetchHistory.Reply(
        storeId: "s", headToken: 9, oldestToken: 0,
        transactions: [
            IOQuaked.Transaction(
                token: 9, author: .import, timestamp: 5, inserted: 0, updated: 1, deleted: 0,
                changes: [
                    IOQuaked.Change(
                        quakeId: "q", kind: .update, fields: [.init(field: "mag", new: .init(float: 4.5))],
                        quake: IOQuaked.Quake(id: "q", mag: 4.5, place: "Somewhere", time: 7))
                ])
        ], hasMore: false, nextAfter: 9)

    @Test("a reply decodes with the known fields intact whatever the unknown member's value, at every level", arguments: unknownValues)
    func skippedAtEveryLevel(extra: String) throws {
        // Names as written in the JSON, and as decoded.
        for (name, decoded) in [("somethingNew", "somethingNew"), ("fütüre", "fütüre"), (#"we\"ird"#, #"we"ird"#)] {
            let json = Self.historyReply(name, extra)
            #expect(
                try IOQuaked.FetchHistory.Reply.decode(json: Array(json.utf8), unknownMembers: .skip)
                    == Self.expectedHistory, "\(json)")
            // The client's path: a whole reply frame, decoded in one pass.
            let frame = Array(#"{"parameters":\#(json),"continues":true}"#.utf8)
            let (result, continues) = try VarlinkReply.decode(IOQuaked.FetchHistory.Reply.self, frame: frame)
            #expect(try result.get() == Self.expectedHistory)
            #expect(continues)
            // The same bytes are refused where strictness is asked for, naming the first one.
            #expect(throws: VarlinkParameterError(path: [decoded], .unknownField)) {
                try IOQuaked.FetchHistory.Reply.decode(json: Array(json.utf8))
            }
        }
    }

    @Test("GetStatus with a field this client has never heard of, beside the ones it has")
    func statusWithNewField() throws {
        let json = #"""
            {"version":"9.9","storeId":"s","headToken":3,"oldestToken":0,"quakeCount":1,"databaseBytes":4096,"feeds":[],"subscribers":0,"clients":[{"name":"c","token":1,"lag":2,"lastSeen":5,"mood":{"happy":[true]}}],"sources":[{"name":"ingv","reports":3,"agencyCodes":["INGV"]}],"somethingNew":{"nested":[{"deep":"\"}]"}]}}
            """#
        let frame = Array(#"{"parameters":\#(json)}"#.utf8)
        let status = try VarlinkReply.decode(IOQuaked.GetStatus.Reply.self, frame: frame).result.get()
        #expect(status.version == "9.9" && status.quakeCount == 1 && status.databaseBytes == 4096)
        #expect(status.clients == [IOQuaked.ClientStatus(name: "c", token: 1, lag: 2, lastSeen: 5)])
        #expect(status.sources == [IOQuaked.SourceStatus(name: "ingv", reports: 3)])
    }

    @Test("error replies' parameters skip unknown members too, and unknown message members are skipped")
    func errorsAndEnvelope() throws {
        let frame = Array(
            #"{"error":"io.quaked.NoSuchQuake","parameters":{"hint":{"try":["x"]},"id":"q1"},"trace":"abc"}"#.utf8)
        let (result, _) = try VarlinkReply.decode(IOQuaked.GetStatus.Reply.self, frame: frame)
        guard case .failure(let error) = result else {
            Issue.record("not an error: \(result)")
            return
        }
        #expect(try IOQuaked.Failure(error) == .noSuchQuake(.init(id: "q1")))
        let reply = try VarlinkReply(parsing: Array(#"{"parameters":{"a":1},"upgraded":false}"#.utf8))
        #expect(reply.parameters == Array(#"{"a":1}"#.utf8) && reply.error == nil)
        // Strict on request.
        #expect(throws: VarlinkParameterError(path: ["upgraded"], .unknownField)) {
            try VarlinkReply(parsing: Array(#"{"parameters":{},"upgraded":false}"#.utf8), unknownMembers: .refuse)
        }
    }

    @Test("what is still refused in a reply: bad JSON inside an unknown member, wrong types and duplicates of known ones, too deep a value")
    func stillStrict() {
        let bad = [
            #"[1,]"#, #""\ud800""#, #""\x""#, "tru", "01", #"{"a" 1}"#, #"{"a":1,}"#, #""a"#, "[", "-",
            String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
        ]
        for extra in bad {
            let json = Self.historyReply("extra", extra)
            #expect(throws: VarlinkParameterError.self, "\(extra)") {
                try IOQuaked.FetchHistory.Reply.decode(json: Array(json.utf8), unknownMembers: .skip)
            }
        }
        // A raw control character or invalid UTF-8 inside an unknown string.
        for bytes: [UInt8] in [[0x0A], [0xC3, 0x28]] {
            let json = Array(#"{"extra":""#.utf8) + bytes + Array(#"","quakes":[],"total":0,"headToken":0}"#.utf8)
            #expect(throws: VarlinkParameterError.self) {
                try IOQuaked.Query.Reply.decode(json: json, unknownMembers: .skip)
            }
        }
        let ok = #"{"quakes":[],"total":0,"headToken":0}"#
        #expect((try? IOQuaked.Query.Reply.decode(json: Array(ok.utf8), unknownMembers: .skip)) != nil)
        for (json, parameter) in [
            (#"{"quakes":[],"total":0,"headToken":0,"total":1}"#, "total"),
            (#"{"quakes":[{"id":"q","time":1.5,"x":1}],"total":0,"headToken":0}"#, "quakes[0].time"),
            (#"{"quakes":[{"time":1,"x":1}],"total":0,"headToken":0}"#, "quakes[0].id"),
            (#"{"quakes":[],"x":{},"headToken":0}"#, "total"),
        ] {
            #expect(throws: VarlinkParameterError.self) {
                try IOQuaked.Query.Reply.decode(json: Array(json.utf8), unknownMembers: .skip)
            }
            do {
                _ = try IOQuaked.Query.Reply.decode(json: Array(json.utf8), unknownMembers: .skip)
            } catch {
                #expect(error.parameter == parameter, "\(json): \(error)")
            }
        }
    }

    // MARK: The server stays strict

    /// org.example.Query: decodes io.quaked's Query parameters (generated, with a nested struct)
    /// exactly as a generated handler does, and replies with their JSON.
    static let querying = VarlinkInterfaceHandler(name: "org.example", description: "interface org.example\n") {
        member, request in
        guard member == "Query" else { return false }
        let parameters = try request.parameters(IOQuaked.Query.Parameters.self)
        let call: VarlinkCallContext<OrgVarlinkService.GetInterfaceDescription.Reply> = request.context()
        try await call.reply(.init(description: String(decoding: parameters.jsonBytes, as: UTF8.self)))
        return true
    }

    @Test(
        "a call with a parameter the interface does not declare is InvalidParameter naming it, at any depth",
        arguments: [
            (#"{"limit":1,"bogus":1}"#, "bogus"),
            (#"{"bogus":{"a":[1]},"limit":1}"#, "bogus"),
            (#"{"near":{"lat":1,"lon":2,"radiusKm":3,"bogus":"\"}"}}"#, "near.bogus"),
            (#"{"filter":{"minMagnitude":3,"bogus":"us"}}"#, "filter.bogus"),
        ])
    func serverRefuses(parameters: String, parameter: String) async throws {
        let channel = NIOAsyncTestingChannel()
        try await channel.connect(to: try SocketAddress(unixDomainSocketPath: "/in-memory"))
        let connection = try await VarlinkServer.makeConnection(
            channel, limits: .init(), limitReplies: ServerTests.replies
        ).get()
        let server = VarlinkServer(
            info: .init(vendor: "v", product: "p", version: "1", url: "u"), interfaces: [Self.querying],
            limits: .init(), limitReplies: ServerTests.replies, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await server.serve(connection) }
            try await ServerTests.send(channel, #"{"method":"org.example.Query","parameters":\#(parameters)}"#)
            #expect(
                try await ServerTests.reply(channel)
                    == #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"\#(parameter)"}}"#)
            // Declared parameters only: served.
            try await ServerTests.send(channel, #"{"method":"org.example.Query","parameters":{"limit":1}}"#)
            #expect(try await ServerTests.reply(channel) == #"{"parameters":{"description":"{\"limit\":1}"}}"#)
            try? await channel.close()
            try await group.waitForAll()
        }
    }

    @Test("the default of a value's own decode(json:) is strict, as a server's parameters are")
    func defaultIsStrict() {
        #expect(throws: VarlinkParameterError(path: ["near", "bogus"], .unknownField)) {
            try IOQuaked.Query.Parameters.decode(json: Array(#"{"near":{"lat":1,"lon":2,"radiusKm":3,"bogus":1}}"#.utf8))
        }
        #expect(throws: VarlinkParameterError(path: ["bogus"], .unknownField)) {
            try VarlinkCall(parsing: Array(#"{"method":"a.b","bogus":1}"#.utf8))
        }
    }
}

extension UnknownMemberTests {
    @Test("skipping a string accepts and refuses exactly what reading it does, and ends in the same place")
    func skipMatchesRead() {
        var samples: [[UInt8]] = [
            #""""#, #""a""#, #""\"""#, #""\\""#, #""\/\b\f\n\r\t""#, #""\u0000\u00e9\uFFFF""#, #""\ud83c\udf0b""#,
            #""\ud83c""#, #""\udf0b""#, #""\ud83cx""#, #""\ud83c\u0041""#, #""\u12""#, #""\u12g4""#, #""\q""#, #""\"#,
            #""abc"#, #"""#, "\"é ü 地震 🌋\"",
        ].map { Array($0.utf8) }
        samples += [[0x22, 0x0A, 0x22], [0x22, 0xC3, 0x28, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xC3, 0x5C, 0x6E, 0x22]]
        // Random strings from the bytes that matter.
        let alphabet: [UInt8] = Array(#"\"u0dDa8F/nbx "#.utf8) + [0x01, 0xC3, 0xA9, 0xED, 0xF0, 0x9F, 0x8C, 0x8B]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...10, using: &generator)
            samples.append([0x22] + (0..<length).map { _ in alphabet.randomElement(using: &generator)! } + [0x22])
        }
        for sample in samples {
            var reader = JSONScanner(sample)
            var skipper = JSONScanner(sample)
            let read = Result { () throws(VarlinkParameterError) in try reader.readString() }
            let skipped = Result { () throws(VarlinkParameterError) in try skipper.skipValue() }
            switch (read, skipped) {
            case (.success, .success): #expect(reader.offset == skipper.offset, "\(sample)")
            case (.failure, .failure): break
            default: Issue.record("\(sample): read \(read), skipped \(skipped)")
            }
        }
    }
}
