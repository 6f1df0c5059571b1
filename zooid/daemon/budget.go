package daemon

import (
	"fmt"
	"unicode/utf8"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// MaxTurnProse is the most an agent's prose one turn posts, in bytes: four
// messages of zevent.MaxBodyBytes, more than any answer a person reads in a
// thread. Text past it is dropped as it streams in, never buffered, so an agent
// that floods its output costs the daemon at most this much per running turn
// (plus one ACP message, which the ACP SDK caps at 10 MiB a line); the thread
// gets what fits and a notice saying how much was dropped.
const MaxTurnProse = 4 * zevent.MaxBodyBytes

// proseBudget takes a turn's streamed text up to MaxTurnProse and counts the rest.
type proseBudget struct {
	left    int
	dropped int64
}

func newProseBudget() *proseBudget { return &proseBudget{left: MaxTurnProse} }

// take returns the part of text the turn may still post, cut on a rune
// boundary; once a chunk is cut, nothing later is taken, so what is posted is
// a prefix of what the agent said.
func (b *proseBudget) take(text string) string {
	if len(text) <= b.left {
		b.left -= len(text)
		return text
	}
	n := b.left
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	b.left = 0
	b.dropped += int64(len(text) - n)
	return text[:n]
}

// notice is what the thread is told when text was dropped; "" when none was.
func (b *proseBudget) notice(agent string) string {
	if b.dropped == 0 {
		return ""
	}
	return fmt.Sprintf("⚠ %s said more than one turn may post (%d bytes); the rest, %d bytes, was not posted.", agent, MaxTurnProse, b.dropped)
}
