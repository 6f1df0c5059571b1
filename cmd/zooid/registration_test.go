package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRegistrationNeedsAPushURL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "zooid.yaml")
	const noListen = `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: 0123456789abcdef0123
    hs_token: fedcba98765432100123
agents:
  agent-a:
    acp: { preset: claude }
    matrix:
      user_id: '@agent-a'
      rooms: ['#general']
`
	if err := os.WriteFile(path, []byte(noListen), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := dispatch([]string{"registration", "--config", path}, &out, &errb); code != 1 || out.Len() != 0 ||
		!strings.Contains(errb.String(), "transports.matrix has no listen address") || !strings.Contains(errb.String(), "--url") {
		t.Fatalf("without listen or --url: exit %d, stdout %q, stderr %q; want exit 1, nothing printed, a hint at listen and --url", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := dispatch([]string{"registration", "--config", path, "--url", "http://127.0.0.1:9000"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "url: http://127.0.0.1:9000") {
		t.Fatalf("with --url: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
