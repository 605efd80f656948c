import Foundation
import Varlink

extension Duration {
    /// The duration in seconds, for `Date` arithmetic and log fields.
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
