import FuzzSupport
import QuakeProtocol
import Varlink

/// Decodes `json` as `T`; when that works, the value's own text must decode to the same value
/// (the generated writer and reader are inverses), and the text must be JSON to `JSONValue` too.
/// Returns whether `json` decoded.
@discardableResult
public func checkRoundTrip<T: VarlinkValue & Equatable>(_ type: T.Type, _ json: [UInt8]) -> Bool {
    let value: T
    do {
        value = try T.decode(json: json)
    } catch {
        return false
    }
    let text = value.jsonBytes
    do {
        let again = try T.decode(json: text)
        check(again == value, "\(T.self): \(show(json)) decodes to \(value), its text \(show(text)) to \(again)")
    } catch {
        fail("\(T.self): \(show(json)) decodes to \(value), but its text \(show(text)) does not: \(error)")
    }
    check((try? JSONValue.decode(json: json)) != nil, "\(T.self) decodes \(show(json)), JSONValue does not")
    return true
}

/// Every type generated from io.quaked.varlink and the runtime's org.varlink.service, as checks
/// of ``checkRoundTrip(_:_:)``.
public let generatedTypes: [(name: String, check: @Sendable ([UInt8]) -> Bool)] =
    [
        entry(IOQuaked.Quake.self), entry(IOQuaked.FieldChange.self), entry(IOQuaked.FieldValue.self),
        entry(IOQuaked.ChangeKind.self), entry(IOQuaked.DeleteReason.self), entry(IOQuaked.Author.self),
        entry(IOQuaked.Tombstone.self), entry(IOQuaked.Change.self), entry(IOQuaked.Transaction.self),
        entry(IOQuaked.ImportCounts.self), entry(IOQuaked.FeedStatus.self), entry(IOQuaked.ClientStatus.self),
        entry(IOQuaked.PullResult.self), entry(IOQuaked.RefreshResult.self), entry(IOQuaked.SubscribeEvent.self),
        entry(IOQuaked.Near.self), entry(IOQuaked.QueryOrder.self),
        entry(IOQuaked.TokenExpired.self), entry(IOQuaked.TokenAhead.self), entry(IOQuaked.StoreMismatch.self),
        entry(IOQuaked.NoSuchQuake.self), entry(IOQuaked.NoSuchFeed.self), entry(IOQuaked.ReloadFailed.self),
        entry(IOQuaked.MessageTooLarge.self), entry(IOQuaked.MessageTimeout.self),
        entry(IOQuaked.TooManyConnections.self),
        entry(OrgVarlinkService.InterfaceNotFound.self), entry(OrgVarlinkService.MethodNotFound.self),
        entry(OrgVarlinkService.MethodNotImplemented.self), entry(OrgVarlinkService.InvalidParameter.self),
        entry(OrgVarlinkService.PermissionDenied.self), entry(OrgVarlinkService.ExpectedMore.self),
        entry(JSONValue.self), entry([String: JSONValue].self), entry([JSONValue].self), entry([String].self),
        entry([Int].self), entry([Double?].self), entry(Bool.self),
    ] + methods.flatMap { [($0.name + ".Parameters", $0.parameters), ($0.name + ".Reply", $0.reply)] }

/// What the checks need of one method: its name and round-trip checks of its types.
public struct MethodChecks: Sendable {
    public var name: String
    /// ``checkRoundTrip(_:_:)`` with the method's parameters.
    public var parameters: @Sendable ([UInt8]) -> Bool
    /// ``checkRoundTrip(_:_:)`` with the method's reply.
    public var reply: @Sendable ([UInt8]) -> Bool
    /// A reply frame decoded as this method's reply (`VarlinkReply.decode`) must agree with the
    /// frame as `VarlinkReply(parsing:)` read it (nil if it did not).
    public var replyFrame: @Sendable ([UInt8], VarlinkReply?) -> Void

    init<M: VarlinkMethod>(_ method: M.Type) where M.Parameters: Equatable, M.Reply: Equatable {
        name = M.name
        parameters = { checkRoundTrip(M.Parameters.self, $0) }
        reply = { checkRoundTrip(M.Reply.self, $0) }
        replyFrame = { checkReplyFrame(M.Reply.self, $0, $1) }
    }
}

/// Every method of io.quaked and org.varlink.service.
public let methods: [MethodChecks] = [
    .init(IOQuaked.GetStatus.self), .init(IOQuaked.Refresh.self), .init(IOQuaked.Subscribe.self),
    .init(IOQuaked.FetchHistory.self), .init(IOQuaked.Acknowledge.self), .init(IOQuaked.Snapshot.self),
    .init(IOQuaked.Query.self), .init(IOQuaked.Get.self), .init(IOQuaked.Delete.self), .init(IOQuaked.Reload.self),
    .init(OrgVarlinkService.GetInfo.self), .init(OrgVarlinkService.GetInterfaceDescription.self),
]

/// See ``MethodChecks/replyFrame``.
func checkReplyFrame<R: VarlinkValue & Equatable>(_ type: R.Type, _ frame: [UInt8], _ parsed: VarlinkReply?) {
    let decoded: (result: Result<R, VarlinkCallError>, continues: Bool)
    do {
        decoded = try VarlinkReply.decode(R.self, frame: frame)
    } catch {
        guard let parsed else { return }
        check(parsed.error == nil, "decode(\(R.self)) refuses the error reply \(show(frame)): \(error)")
        // Refused only for parameters that are not an R.
        check(
            (try? R.decode(json: parsed.parameters, unknownMembers: .skip)) == nil,
            "decode(\(R.self)) refuses \(show(frame)) (\(error)), though its parameters are one")
        return
    }
    guard let parsed else { fail("decode(\(R.self)) takes \(show(frame)), VarlinkReply(parsing:) does not") }
    check(decoded.continues == parsed.continues, "decode(\(R.self)) of \(show(frame)): continues")
    switch decoded.result {
    case .success(let value):
        check(parsed.error == nil, "decode(\(R.self)) of \(show(frame)): a value, not the error")
        check(
            (try? R.decode(json: parsed.parameters, unknownMembers: .skip)) == value,
            "decode(\(R.self)) of \(show(frame)): \(value), not what its parameters decode to")
    case .failure(let error):
        check(error.name == parsed.error, "decode(\(R.self)) of \(show(frame)): error \(error.name)")
        // The same parameters, if not the same text.
        let a = try? JSONValue.decode(json: error.parameters)
        let b = try? JSONValue.decode(json: parsed.parameters)
        check(
            a == b,
            "decode(\(R.self)) of \(show(frame)): error parameters \(show(error.parameters)), parsed \(show(parsed.parameters))"
        )
    }
}

private func entry<T: VarlinkValue & Equatable>(_ type: T.Type) -> (name: String, check: @Sendable ([UInt8]) -> Bool) {
    ("\(T.self)", { checkRoundTrip(T.self, $0) })
}
