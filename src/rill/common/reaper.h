// The reaper: one process-wide thread that runs destructions which must not run
// on the thread that asks for them.
//
// An object whose owner may let go of it from one of the object's own threads
// (an Engine dropped by a callback on its tick thread) cannot be destroyed
// there: the thread would have to join itself, and it would go on to run the
// rest of its frames over freed members. Such owners hand the destruction to
// the reaper instead. The reaper thread is started on first use and joined at
// process exit (it is a static object), after it has run every destruction
// handed to it; it is never detached.
//
// Rules for what is handed over: it may join any thread except the reaper's,
// and must not wait for a destruction handed over after it (the reaper runs
// them one at a time, in order).
#pragma once

#include <functional>

namespace rill {

/// Run `destroy` on the reaper thread after every destruction handed over
/// before it; returns at once. Any thread, the reaper's included.
void DeferDestruction(std::function<void()> destroy);

/// Block until every destruction handed over before this call has run. Any
/// thread but the reaper's (where it returns at once), and not from a thread
/// that a pending destruction joins (a tick callback): that would deadlock.
void WaitForDeferredDestructions();

/// True on the reaper thread.
bool OnReaperThread();

}  // namespace rill
