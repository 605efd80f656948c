import QuakeAssociation
import QuakeModel
import Testing
