import Foundation
import QuakeModel

extension FDSNTestService {
    // MARK: Answering

    /// What a request gets, decided under the lock; ``make`` builds the body after it.
    private struct Plan {
        var make: () -> TestResponse
        var query: Query?
        var fault: Fault?
        var matched: Int?
        var returned: Int?
    }

    func answer(_ endpoint: Endpoint, _ request: RecordedRequest) -> TestResponse {
        let parameters = request.query
        let plan = state.withLockedValue { state in
            endpoint == .query ? planQuery(request, parameters, &state) : Self.planCount(parameters, &state)
        }
        let response = plan.make()
        state.withLockedValue {
            $0.log.append(
                LoggedRequest(
                    endpoint: endpoint, request: request, query: plan.query, status: response.status,
                    fault: plan.fault, matched: plan.matched, returned: plan.returned))
        }
        return response
    }

    private func planQuery(_ request: RecordedRequest, _ parameters: [String: String], _ state: inout State) -> Plan {
        let fault: Fault? = state.faults.isEmpty ? state.failAlways : state.faults.removeFirst()
        var plan = Plan(make: { TestResponse.status(500) }, fault: fault)
        do throws(QueryError) {
            let query = try Query(parameters: parameters, maximumLimit: state.searchLimit)
            guard let format = Format(parameter: query.format) else {
                throw QueryError(
                    parameter: "format",
                    message: "Bad format value \"\(query.format ?? "")\". Must be one of xml, quakeml, text, geojson.")
            }
            let (matched, page) = Self.select(query, in: state)
            plan.matched = matched
            if query.limit == nil && matched > state.searchLimit {
                let body = Self.searchLimitMessage(matching: matched, limit: state.searchLimit)
                plan.make = { TestResponse.status(400, body: body) }
            } else {
                plan.query = query
                plan.returned = page.count
                let features = page.map { state.ordered[$0] }
                let url = origin + request.uri
                let layout = state.textLayout
                switch format {
                case _ where features.isEmpty && (format != .geojson || query.noData != nil):
                    let code = query.noData ?? 204
                    plan.make = { Self.noData(code) }
                case .geojson: plan.make = { Self.featureCollection(features, url: url) }
                case .xml: plan.make = { Self.quakeML(features) }
                case .text: plan.make = { Self.fdsnText(features, layout: layout) }
                }
            }
        } catch {
            let response = Self.badRequest(error.message)
            plan.make = { response }
        }
        if let fault {
            let make = plan.make
            plan.make = { fault.apply(to: make) }
        }
        if let slow = state.slowMode {
            let make = plan.make
            plan.make = {
                let response = make()
                guard case .normal = response.behavior else { return response }
                return response.slow(chunkSize: slow.chunkSize, delay: slow.delay)
            }
        }
        return plan
    }

    private static func planCount(_ parameters: [String: String], _ state: inout State) -> Plan {
        guard state.countAvailable else {
            return Plan(make: { TestResponse.status(404, body: "Error 404: Not Found\n\nNo count method here.\n") })
        }
        var plan = Plan(make: { TestResponse.status(500) }, fault: state.countFault)
        do throws(QueryError) {
            let query = try Query(parameters: parameters, maximumLimit: state.searchLimit)
            if let format = query.format, format != "geojson", format != "text" {
                throw QueryError(
                    parameter: "format",
                    message: "Bad format value \"\(format)\". This test service counts in geojson or text only.")
            }
            let matched = matching(query, in: state).count
            let told = state.countLies?(matched) ?? matched
            let response =
                query.format == "geojson"
                ? TestResponse.text("{\"count\":\(told),\"maxAllowed\":\(state.searchLimit)}")
                : TestResponse.text("\(told)", contentType: "text/plain")
            plan.query = query
            plan.matched = matched
            plan.make = { response }
        } catch {
            let response = badRequest(error.message)
            plan.make = { response }
        }
        if let fault = plan.fault {
            let make = plan.make
            plan.make = { fault.apply(to: make) }
        }
        return plan
    }

    /// The body of the 400 answered when a query without `limit` matches more than the search limit.
    public static func searchLimitMessage(matching: Int, limit: Int) -> String {
        "Error 400: Bad Request\n\n\(matching) matching events exceeds search limit of \(limit). "
            + "Modify the search to match fewer events.\n"
    }

    private static func badRequest(_ message: String) -> TestResponse {
        TestResponse.status(400, body: "Error 400: Bad Request\n\n\(message)\n")
    }

    private static func featureCollection(_ features: [Stored], url: String) -> TestResponse {
        let generated = QuakeTime.milliseconds(Date(), rounding: .down)
        let head =
            "{\"type\":\"FeatureCollection\",\"metadata\":{\"generated\":\(generated),\"url\":\(jsonString(url)),"
            + "\"title\":\"USGS Earthquakes\",\"status\":200,\"api\":\"\(apiVersion)\",\"count\":\(features.count)},"
            + "\"features\":["
        var tail = "]"
        var minimum = (lon: Double.infinity, lat: Double.infinity, depth: Double.infinity)
        var maximum = (lon: -Double.infinity, lat: -Double.infinity, depth: -Double.infinity)
        var size = head.utf8.count + 64
        for stored in features {
            size += stored.bytes.count + 1
            guard let lon = stored.event.longitude, let lat = stored.event.latitude else { continue }
            minimum.lon = min(minimum.lon, lon)
            minimum.lat = min(minimum.lat, lat)
            maximum.lon = max(maximum.lon, lon)
            maximum.lat = max(maximum.lat, lat)
            if let depth = stored.event.depth {
                minimum.depth = min(minimum.depth, depth)
                maximum.depth = max(maximum.depth, depth)
            }
        }
        if minimum.lon.isFinite {
            if !minimum.depth.isFinite { (minimum.depth, maximum.depth) = (0, 0) }
            let numbers = [minimum.lon, minimum.lat, minimum.depth, maximum.lon, maximum.lat, maximum.depth]
            tail += ",\"bbox\":[" + numbers.map { PropertyValue.double($0).json }.joined(separator: ",") + "]"
        }
        tail += "}"
        var body: [UInt8] = []
        body.reserveCapacity(size)
        body.append(contentsOf: head.utf8)
        for (position, stored) in features.enumerated() {
            if position > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: stored.bytes)
        }
        body.append(contentsOf: tail.utf8)
        return TestResponse(body: .bytes(body), contentType: "application/json")
    }
}
