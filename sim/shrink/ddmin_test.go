package shrink

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

func contains(keep []int, want ...int) bool {
	have := map[int]bool{}
	for _, k := range keep {
		have[k] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

func TestDDMinFindsTheFailingItems(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		fail func([]int) bool
		want []int
	}{
		{"one item", 500, func(k []int) bool { return contains(k, 377) }, []int{377}},
		{"two far apart", 500, func(k []int) bool { return contains(k, 3, 480) }, []int{3, 480}},
		{"three adjacent", 64, func(k []int) bool { return contains(k, 20, 21, 22) }, []int{20, 21, 22}},
		{"either of two", 100, func(k []int) bool { return contains(k, 10) || contains(k, 90) }, nil},
		{"at least four of the evens below 10", 50, func(k []int) bool {
			n := 0
			for _, x := range k {
				if x < 10 && x%2 == 0 {
					n++
				}
			}
			return n >= 4
		}, nil},
		{"fails empty", 10, func(k []int) bool { return true }, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st, err := DDMin(context.Background(), tc.n, func(_ context.Context, k []int) (bool, error) { return tc.fail(k), nil })
			if err != nil {
				t.Fatal(err)
			}
			if !tc.fail(got) {
				t.Fatalf("result %v does not fail", got)
			}
			if tc.want != nil && !(len(tc.want) == 0 && len(got) == 0) && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// 1-minimal: without any one of its items it passes.
			for i := range got {
				less := append(append([]int(nil), got[:i]...), got[i+1:]...)
				if tc.fail(less) {
					t.Errorf("%v is not 1-minimal: %v fails too", got, less)
				}
			}
			t.Logf("%d items → %v in %d tests (%d cached)", tc.n, got, st.Tests, st.Cached)
			if tc.name == "two far apart" && st.Tests > 80 {
				t.Errorf("%d tests to find two items among 500; ddmin needs about 2·2·log2(500) ≈ 40", st.Tests)
			}
		})
	}
}

func TestDDMinStopsOnError(t *testing.T) {
	boom := errors.New("replay could not start")
	calls := 0
	_, _, err := DDMin(context.Background(), 20, func(context.Context, []int) (bool, error) {
		calls++
		if calls == 3 {
			return false, boom
		}
		return false, nil
	})
	if !errors.Is(err, boom) || calls != 3 {
		t.Errorf("err %v after %d calls, want the test's error at the third", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := DDMin(ctx, 20, func(context.Context, []int) (bool, error) { return true, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v", err)
	}
}
