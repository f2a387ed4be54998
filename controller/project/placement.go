package project

// filterSide is the placement rule for the filters of a link across
// computes (one relay on each): which endpoint's relay applies them. Applied
// on both sides they would act twice.
//
// While the link captures, the filters run on the capture side, so the file
// holds what crossed the wire after the filters in both directions (GNS3
// chooses the two sides independently, and a capture can then show one
// direction before the filters and the other after them). Otherwise they
// run where a capture would start (captureSide), and on the first endpoint
// when no node is started.
func filterSide(nodes []*Node, c Capture) int {
	if c.Active {
		return c.Side
	}
	if side := captureSide(nodes); side >= 0 {
		return side
	}
	return 0
}
