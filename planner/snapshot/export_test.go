package snapshot

// ReadOldWay reads as rollplan read before issue 21 (every file through
// YAML, one item at a time) until the returned function is called.
func ReadOldWay() (restore func()) {
	readRawJSON, readYAMLItems, readParallel = false, false, false
	return func() { readRawJSON, readYAMLItems, readParallel = true, true, true }
}
