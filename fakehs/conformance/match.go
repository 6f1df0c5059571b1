package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Check is one expectation about a JSON body; it returns a description of the mismatch or nil.
type Check func(body gjson.Result) error

// KeyEqual checks that the gjson path holds exactly want (compared as JSON-ish values).
func KeyEqual(path string, want any) Check {
	return func(body gjson.Result) error {
		got := body.Get(path)
		if !got.Exists() {
			return fmt.Errorf("key %q missing", path)
		}
		if fmt.Sprint(got.Value()) != fmt.Sprint(want) {
			return fmt.Errorf("key %q = %s, want %v", path, got.Raw, want)
		}
		return nil
	}
}

// KeyPresent checks that the gjson path exists.
func KeyPresent(path string) Check {
	return func(body gjson.Result) error {
		if !body.Get(path).Exists() {
			return fmt.Errorf("key %q missing", path)
		}
		return nil
	}
}

// KeyNonEmptyString checks that the gjson path is a non-empty string.
func KeyNonEmptyString(path string) Check {
	return func(body gjson.Result) error {
		got := body.Get(path)
		if got.Type != gjson.String || got.Str == "" {
			return fmt.Errorf("key %q = %s, want a non-empty string", path, got.Raw)
		}
		return nil
	}
}

// MatchJSON fails the test with every failed check and the whole body.
func MatchJSON(t testing.TB, what string, body gjson.Result, checks ...Check) {
	t.Helper()
	var errs []string
	for _, c := range checks {
		if err := c(body); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		t.Fatalf("%s: %s\nbody: %s", what, strings.Join(errs, "; "), truncate(body.Raw, 2000))
	}
}

// MustStatus fails unless the response has the status and, when errcode is not empty, that
// Matrix errcode.
func MustStatus(t testing.TB, res *Response, status int, errcode string) {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("want status %d %s, got: %s", status, errcode, res)
	}
	if errcode != "" {
		if got := res.JSON().Get("errcode").String(); got != errcode {
			t.Fatalf("want errcode %s, got %q: %s", errcode, got, res)
		}
	}
}

// ExpectStatus is MustStatus that records the failure and lets the test go on, for lists of
// independent checks where every divergence should show in one run.
func ExpectStatus(t testing.TB, res *Response, status int, errcode string) {
	t.Helper()
	if res.StatusCode != status {
		t.Errorf("want status %d %s, got: %s", status, errcode, res)
		return
	}
	if errcode != "" {
		if got := res.JSON().Get("errcode").String(); got != errcode {
			t.Errorf("want errcode %s, got %q: %s", errcode, got, res)
		}
	}
}

// ExpectError is MustBeError that records the failure and lets the test go on.
func ExpectError(t testing.TB, res *Response, status int) {
	t.Helper()
	if res.StatusCode != status || res.JSON().Get("errcode").String() == "" {
		t.Errorf("want a Matrix error with status %d, got: %s", status, res)
	}
}

// MustBeError fails unless the response is a Matrix error with the status: a JSON object with a
// non-empty errcode (used where Synapse and the spec do not pin the errcode down).
func MustBeError(t testing.TB, res *Response, status int) {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("want status %d, got: %s", status, res)
	}
	if res.JSON().Get("errcode").String() == "" {
		t.Fatalf("want a Matrix error body with errcode: %s", res)
	}
}

// MustEqualStrings fails unless got equals want, element by element, printing both.
func MustEqualStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}

// ExpectEqualStrings is MustEqualStrings that records the failure and lets the test go on, for
// lists of independent reads where every divergence should show in one run.
func ExpectEqualStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}

// field returns an object's member by exact key, because ids contain '.' and ':' that gjson
// paths would interpret.
func field(obj gjson.Result, key string) gjson.Result {
	return obj.Get(gjson.Escape(key))
}

// MatchResponse fails unless res is 2xx and its body passes every check, printing the exact
// request and response.
func MatchResponse(t testing.TB, what string, res *Response, checks ...Check) {
	t.Helper()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		t.Fatalf("%s: want 2xx: %s", what, res)
	}
	var errs []string
	for _, c := range checks {
		if err := c(res.JSON()); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		t.Fatalf("%s: %s\nexchange: %s", what, strings.Join(errs, "; "), res)
	}
}
