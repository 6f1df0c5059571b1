package scenarios

import (
	"reflect"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

func TestRecordShortNamesAndPrefixes(t *testing.T) {
	users := []id.UserID{"@zs-agent-a:localhost", "@Ori:example.org", "@1bot:example.org"}
	got, err := shortNames(users, []string{"zs-"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[id.UserID]string{"@zs-agent-a:localhost": "agent-a", "@Ori:example.org": "ori", "@1bot:example.org": "u-1bot"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if _, err := shortNames([]id.UserID{"@ori:a.org", "@ori:b.org"}, nil); err == nil || !strings.Contains(err.Error(), `would both be called "ori"`) {
		t.Errorf("want a collision error, got %v", err)
	}
}
