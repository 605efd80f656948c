// Real EMSC websocket messages, byte for byte, from the shared fixtures (`Tests/QuakeSourcesTests/Fixtures`
// holds the same files; its README gives their origins). Embedded as literals, so that the tests read
// nothing outside this target; each literal's closing delimiter is at column 0, so no indentation is
// removed and the value is the file's bytes exactly.
enum EMSCFixtures {
    /// `mightymatth__earthquake-tools__emsc_ws_test.json`: `create`, 20210502_0000100, OFFSHORE COQUIMBO, CHILE, ml 2.7, auth GUC.
    static let wsTest = #"""

{
   "action":"create",
   "data":{
      "geometry":{
         "type":"Point",
         "coordinates":[
            -71.53,
            -30.07,
            -38.0
         ]
      },
      "type":"Feature",
      "id":"20210502_0000100",
      "properties":{
         "lastupdate":"2021-05-02T13:01:00.0Z",
         "magtype":"ml",
         "evtype":"ke",
         "lon":-71.53,
         "auth":"GUC",
         "lat":-30.07,
         "depth":38.0,
         "unid":"20210502_0000100",
         "mag":2.7,
         "time":"2021-05-02T12:46:04.0Z",
         "source_id":"978886",
         "source_catalog":"EMSC-RTS",
         "flynn_region":"OFFSHORE COQUIMBO, CHILE"
      }
   }
}

"""#

    /// `mightymatth__earthquake-tools__response.json`: `create`, 20201229_0000078, CROATIA, mw 6.4, auth EMSC (the Petrinja main shock).
    static let petrinja = #"""
{
  "action": "create",
  "data": {
    "geometry": {
      "type": "Point",
      "coordinates": [
        16.31,
        45.46,
        -10.0
      ]
    },
    "type": "Feature",
    "id": "20201229_0000078",
    "properties": {
      "lastupdate": "2020-12-29T12:42:00.0Z",
      "magtype": "mw",
      "evtype": "ke",
      "lon": 16.31,
      "auth": "EMSC",
      "lat": 45.46,
      "depth": 10.0,
      "unid": "20201229_0000078",
      "mag": 6.4,
      "time": "2020-12-29T11:19:54.6Z",
      "source_id": "933701",
      "source_catalog": "EMSC-RTS",
      "flynn_region": "CROATIA"
    }
  }
}

"""#

    /// `h00s__goseismic__README.json`: `update`, 20201230_0000082, CENTRAL CALIFORNIA, md 2.4, auth NC.
    static let goseismic = #"""
{
  "action":"create",
  "data":{
    "geometry":{
      "type":"Point",
      "coordinates":[
        -121.2,
        36.6,
        -4.0
      ]
    },
    "type":"Feature",
    "id":"20201230_0000082",
    "properties":{
      "lastupdate":"2020-12-30T08:47:00.0Z",
      "magtype":"md",
      "evtype":"ke",
      "lon":-121.2,
      "auth":"NC",
      "lat":36.6,
      "depth":4.0,
      "unid":"20201230_0000082",
      "mag":2.4,
      "time":"2020-12-30T08:45:29.9Z",
      "source_id":"934165",
      "source_catalog":"EMSC-RTS",
      "flynn_region":"CENTRAL CALIFORNIA"
    }
  }
}

"""#

    /// `EMSC-CSEM__webservices101__usecase3.json`: EMSC's own documented example, which is not strict JSON (a comma after the last member of `properties`): a real bad message.
    static let documentedExample = #"""
{
  "action": "create",
  "data": {
    "type": "Feature",
    "geometry": {
      "type": "Point",
      "coordinates": [
        28.5381,
        40.115,
        -7.0
      ]
    },
    "id": "20250305_0000090",
    "properties": {
      "source_id": "1779128",
      "source_catalog": "EMSC-RTS",
      "lastupdate": "2025-03-05T10:06:56.102425Z",
      "time": "2025-03-05T09:45:07.0Z",
      "flynn_region": "WESTERN TURKEY",
      "lat": 40.115,
      "lon": 28.5381,
      "depth": 7.0,
      "evtype": "ke",
      "auth": "AFAD",
      "mag": 1.4,
      "magtype": "ml",
      "unid": "20250305_0000090",
    }
  }
}

"""#

    /// The three real messages that read, in this order.
    static let good = [wsTest, petrinja, goseismic]
}
