import ArgumentParser
import Foundation
import QuakeFeed
import QuakeProtocol

/// Which updates `watch` prints and runs `--exec` for. Updates that do not qualify still reach the
/// cache (it stays equal to the store); they are only not delivered. Inserts, enters, leaves and
/// deletes are always delivered.
public struct RevisionOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("on-change"),
        help: ArgumentHelp(
            "Deliver an update only when one of these fields changed: mag, status, alert, tsunami, location (comma-separated).",
            valueName: "fields"))
    public var onChange: String?

    @Option(
        name: .customLong("min-mag-change"),
        help: ArgumentHelp("A magnitude change counts only when it is at least this large.", valueName: "magnitude"))
    public var minMagChange: Double?

    @Option(
        name: .customLong("min-move-km"),
        help: ArgumentHelp("A location change counts only when the epicentre moved at least this far.", valueName: "km"))
    public var minMoveKm: Double?

    public init() {}

    /// The rules the flags give, or nil for none (every update is delivered). Throws
    /// ValidationError naming the flag.
    public func rules() throws -> RevisionRules? {
        if let minMagChange, !(minMagChange.isFinite && minMagChange > 0) {
            throw ValidationError("--min-mag-change must be a positive magnitude difference, e.g. 0.3.")
        }
        if let minMoveKm, !(minMoveKm.isFinite && minMoveKm > 0) {
            throw ValidationError("--min-move-km must be a positive number of kilometres.")
        }
        var fields: Set<RevisionRules.Field>
        if let onChange {
            fields = []
            for name in onChange.split(separator: ",", omittingEmptySubsequences: false) {
                let name = name.trimmingCharacters(in: .whitespaces).lowercased()
                guard let field = RevisionRules.Field(rawValue: name) else {
                    throw ValidationError(
                        "--on-change: \"\(name)\" is not a field; give mag, status, alert, tsunami or location.")
                }
                fields.insert(field)
            }
            // A threshold for a field the list leaves out would never apply: two rules that
            // disagree, refused rather than guessed.
            if minMagChange != nil && !fields.contains(.mag) {
                throw ValidationError("--min-mag-change needs mag in --on-change (it lists \(onChange)).")
            }
            if minMoveKm != nil && !fields.contains(.location) {
                throw ValidationError("--min-move-km needs location in --on-change (it lists \(onChange)).")
            }
        } else {
            // Without a list, the thresholds given name the fields.
            fields = []
            if minMagChange != nil { fields.insert(.mag) }
            if minMoveKm != nil { fields.insert(.location) }
            if fields.isEmpty { return nil }
        }
        return RevisionRules(fields: fields, minMagChange: minMagChange ?? 0, minMoveKm: minMoveKm ?? 0)
    }
}

/// Whether an update is worth delivering: a listed field changed, by at least its threshold.
///
/// Only the listed fields' own values are judged: an update that changed only the agencies
/// (`agency`, `contributors`, `sources`: a second agency joining, or one agency's solution revised
/// while another's stays preferred) is not delivered, whatever the contributors' magnitudes.
public struct RevisionRules: Sendable, Hashable {
    public enum Field: String, Sendable, Hashable, CaseIterable {
        case mag, status, alert, tsunami, location
    }

    public var fields: Set<Field>
    /// For `mag`: the smallest change that counts (0: any change).
    public var minMagChange: Double
    /// For `location`: the smallest epicentre move, in km, that counts (0: any change of
    /// latitude, longitude or depth).
    public var minMoveKm: Double

    public init(fields: Set<Field>, minMagChange: Double = 0, minMoveKm: Double = 0) {
        self.fields = fields
        self.minMagChange = minMagChange
        self.minMoveKm = minMoveKm
    }

    /// The values the rules look at, of one version of a quake.
    public struct Image: Sendable, Hashable {
        public var mag: Double?
        public var status: String?
        public var alert: String?
        public var tsunami: Int?
        public var lat: Double?
        public var lon: Double?
        public var depth: Double?

        public init(_ q: IOQuaked.Quake?) {
            mag = q?.mag
            status = q?.status
            alert = q?.alert
            tsunami = q?.tsunami
            lat = q?.lat
            lon = q?.lon
            depth = q?.depth
        }

        /// These values with one side (old or new) of a change's fields applied.
        func applying(_ fields: [IOQuaked.FieldChange], new: Bool) -> Image {
            var image = self
            for change in fields {
                let value = new ? change.new : change.old
                let number = value?.float ?? value?.int.map(Double.init)
                switch change.field {
                case "mag": image.mag = number
                case "status": image.status = value?.string
                case "alert": image.alert = value?.string
                case "tsunami": image.tsunami = value?.int
                case "lat": image.lat = number
                case "lon": image.lon = number
                case "depth": image.depth = number
                default: break
                }
            }
            return image
        }
    }

    /// Whether `change` is delivered, given the quake as the cache held it before the change's
    /// transaction. An update is judged by its own fields' old and new values (not by the quake
    /// as stored now, which a later transaction may have changed again).
    public func delivers(_ change: IOQuaked.Change, before: IOQuaked.Quake?) -> Bool {
        guard change.kind == .update else { return true }
        let fields = change.fields ?? []
        let base = Image(before)
        return qualifies(old: base.applying(fields, new: false), new: base.applying(fields, new: true))
    }

    public func qualifies(before: IOQuaked.Quake, after: IOQuaked.Quake) -> Bool {
        qualifies(old: Image(before), new: Image(after))
    }

    public func qualifies(old before: Image, new after: Image) -> Bool {
        for field in fields {
            switch field {
            case .mag:
                switch (before.mag, after.mag) {
                case (let old?, let new?):
                    let moved = abs(new - old)
                    // Magnitudes come to one or two decimals: 4.5 to 4.8 is a change of 0.3,
                    // though in binary it is 0.29999...
                    if moved > 0 && moved + 1e-9 >= minMagChange { return true }
                case (nil, nil): break
                default: return true
                }
            case .status:
                if before.status != after.status { return true }
            case .alert:
                if before.alert != after.alert { return true }
            case .tsunami:
                if (before.tsunami ?? 0) != (after.tsunami ?? 0) { return true }
            case .location:
                switch (before.lat, before.lon, after.lat, after.lon) {
                case (let lat1?, let lon1?, let lat2?, let lon2?):
                    if minMoveKm > 0 {
                        if Geodesy.distanceKm(lat1, lon1, lat2, lon2) + 1e-9 >= minMoveKm { return true }
                    } else if lat1 != lat2 || lon1 != lon2 || before.depth != after.depth {
                        return true
                    }
                case (nil, nil, nil, nil): break
                default: return true
                }
            }
        }
        return false
    }
}
