package cq

// SetHookForTest sets the wait paths' test hook (nil clears it); set it
// before any Wait runs and clear it after they all returned.
func SetHookForTest(f func(point string, q *CQ)) { testHook = f }

// MarkRecheckForTest puts q on its channel's recheck list, as a read
// event does, under q's wait lock.
func (q *CQ) MarkRecheckForTest() {
	q.wait <- struct{}{}
	q.ch.markRecheck(q)
	<-q.wait
}

// RecheckLenForTest returns the length of ch's recheck list.
func RecheckLenForTest(ch *Channel) int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.recheck)
}
