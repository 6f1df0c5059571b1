package steps

import (
	"testing"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

func TestLongProseHasTheSizeAsked(t *testing.T) {
	for _, n := range []int{1, 500, 49152, 150000} {
		if got := zevent.BodySize(longProse(n)); got != n {
			t.Errorf("BodySize(longProse(%d)) = %d", n, got)
		}
	}
}
