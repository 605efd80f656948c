import QuakeModel

/// Association of reports into events.
public enum Association {}
