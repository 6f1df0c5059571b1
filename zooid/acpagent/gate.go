package acpagent

import "io"

// GatedReader holds back reads until Open is called. acp-go-sdk starts reading
// in its constructor and reads its logger when the stream ends, so setting the
// logger after construction races with a peer that exits at once; gating the
// stream orders SetLogger before the first read.
type GatedReader struct {
	r    io.Reader
	open chan struct{}
}

// NewGatedReader wraps r; reads block until Open.
func NewGatedReader(r io.Reader) *GatedReader {
	return &GatedReader{r: r, open: make(chan struct{})}
}

// Open lets reads through. Call it once.
func (g *GatedReader) Open() { close(g.open) }

// Read waits for Open, then reads from the wrapped reader.
func (g *GatedReader) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}
