#ifndef QUAKED_SQLITE_CONFIG_H
#define QUAKED_SQLITE_CONFIG_H

/// Configures SQLite for this process if it has not been initialised yet: multi-thread mode
/// (SQLITE_CONFIG_MULTITHREAD: a connection takes no mutex per API call) and no memory
/// statistics (SQLITE_CONFIG_MEMSTATUS off: no global mutex per allocation). Returns the first
/// failing sqlite3_config result code, or SQLITE_OK. SQLITE_MISUSE means SQLite was already in
/// use; the settings then stay as they were, which is just as correct, only slower.
///
/// A C shim because sqlite3_config is variadic, which Swift cannot call.
int quaked_sqlite_configure(void);

#endif
