/// The Varlink interfaces quaked serves.
public enum QuakedInterface {
    /// The text of `io.quaked.varlink`, embedded at build time: that file is the protocol's one
    /// source of truth, served verbatim by `org.varlink.service.GetInterfaceDescription`.
    public static let description = String(decoding: PackageResources.io_quaked_varlink, as: UTF8.self)
    public static let name = "io.quaked"

    /// The Varlink service interface every Varlink service implements.
    public static let serviceDescription = """
        interface org.varlink.service

        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        method GetInterfaceDescription(interface: string) -> (description: string)

        error InterfaceNotFound (interface: string)
        error MethodNotFound (method: string)
        error MethodNotImplemented (method: string)
        error InvalidParameter (parameter: string)
        error PermissionDenied ()
        error ExpectedMore ()

        """
}
