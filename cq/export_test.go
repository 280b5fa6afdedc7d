package cq

// SetHookForTest sets the wait paths' test hook (nil clears it); set it
// before any Wait runs and clear it after they all returned.
func SetHookForTest(f func(point string, q *CQ)) { testHook = f }
