package steps

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite features/README.md from the step definitions")

//go:generate go run ./catalogue

// TestStepCatalogueIsCurrent fails when features/README.md differs from what
// the step definitions generate; -update (or go generate ./steps) rewrites it.
func TestStepCatalogueIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCatalogue(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "features", "README.md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the catalogue: %v (run: go generate ./steps)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s is stale; run: go generate ./steps", path)
	}
}

// TestEveryStepIsDocumented keeps the vocabulary honest: every step has an
// example that its own pattern matches and a one-line doc.
func TestEveryStepIsDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range definitions(nil) {
		re, err := regexp.Compile(d.pattern)
		if err != nil {
			t.Errorf("%s: %v", d.pattern, err)
			continue
		}
		if !re.MatchString(d.example) {
			t.Errorf("example %q does not match its pattern %s", d.example, d.pattern)
		}
		if d.doc == "" || strings.Contains(d.doc, "\n") {
			t.Errorf("%s: want a one-line doc", d.pattern)
		}
		if seen[d.pattern] {
			t.Errorf("%s is defined twice", d.pattern)
		}
		seen[d.pattern] = true
		for _, o := range definitions(nil) {
			if o.pattern != d.pattern && regexp.MustCompile(o.pattern).MatchString(d.example) {
				t.Errorf("example %q is ambiguous: also matches %s", d.example, o.pattern)
			}
		}
	}
}

// TestFeaturesUseOnlyDefinedSteps parses every feature line that is a step
// and checks exactly one definition matches it, so a typo fails fast.
func TestFeaturesUseOnlyDefinedSteps(t *testing.T) {
	dir, err := FeaturesDir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.feature"))
	if len(files) == 0 {
		t.Fatal("no features found")
	}
	var res []*regexp.Regexp
	for _, d := range definitions(nil) {
		res = append(res, regexp.MustCompile(d.pattern))
	}
	kw := regexp.MustCompile(`^\s*(Given|When|Then|And|But|\*) (.*)$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			m := kw.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n := 0
			for _, re := range res {
				if re.MatchString(m[2]) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s:%d: %q matches %d step definitions", filepath.Base(f), i+1, m[2], n)
			}
		}
	}
}
