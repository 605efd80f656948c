import Foundation

/// An independent reading of a feed file with Foundation's JSONSerialization: the oracle the
/// streaming parser and the importer are checked against.
public struct FeedDocument {
    /// Each feature as a JSON object.
    public let features: [[String: Any]]

    public init(contentsOf url: URL) throws {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        self.features = object["features"] as! [[String: Any]]
    }

    /// The `id` of each feature, in order.
    public var ids: [String] { features.compactMap { $0["id"] as? String } }

    /// Feature id → its `properties.updated`.
    public var updatedByID: [String: Int64] {
        var result: [String: Int64] = [:]
        for feature in features {
            guard let id = feature["id"] as? String, let properties = feature["properties"] as? [String: Any] else {
                continue
            }
            result[id] = (properties["updated"] as? NSNumber)?.int64Value
        }
        return result
    }

    /// Feature id → its `properties` and `geometry`, as JSON data compared for equality.
    public var contentByID: [String: NSDictionary] {
        var result: [String: NSDictionary] = [:]
        for feature in features {
            guard let id = feature["id"] as? String else { continue }
            result[id] = NSDictionary(dictionary: [
                "properties": feature["properties"] ?? NSNull(), "geometry": feature["geometry"] ?? NSNull(),
            ])
        }
        return result
    }

    /// Feature id → the other ids its `properties.ids` lists.
    public var aliasesByID: [String: [String]] {
        var result: [String: [String]] = [:]
        for feature in features {
            guard let id = feature["id"] as? String, let properties = feature["properties"] as? [String: Any],
                let ids = properties["ids"] as? String
            else { continue }
            result[id] = ids.split(separator: ",").map(String.init).filter { $0 != id }
        }
        return result
    }
}
