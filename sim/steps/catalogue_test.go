package steps

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	gherkin "github.com/cucumber/gherkin/go/v42"
	"github.com/cucumber/godog"
	messages "github.com/cucumber/messages/go/v34"
)

var update = flag.Bool("update", false, "rewrite features/README.md from the step definitions")

//go:generate go run ../../cmd/step-catalogue

// TestStepCatalogueIsCurrent fails when features/README.md differs from what
// the step definitions generate; -update (or go generate ./sim/steps) rewrites it.
func TestStepCatalogueIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCatalogue(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "features", "README.md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the catalogue: %v (run: go generate ./sim/steps)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s is stale; run: go generate ./sim/steps", path)
	}
}

// TestUnknownAreaFailsTheCatalogue: a step filed under a section the
// catalogue lacks must stop generation, not vanish from the README.
func TestUnknownAreaFailsTheCatalogue(t *testing.T) {
	defs := append(definitions(nil), stepDef{area: "misc", pattern: `^x$`, example: `x`, doc: "x"})
	if err := checkAreas(defs); err == nil || !strings.Contains(err.Error(), `"misc"`) {
		t.Fatalf("checkAreas = %v, want a refusal naming the area", err)
	}
	if err := checkAreas(definitions(nil)); err != nil {
		t.Fatal(err)
	}
}

// TestEveryStepIsDocumented keeps the vocabulary honest: every step has an
// example that its own pattern matches and a one-line doc.
func TestEveryStepIsDocumented(t *testing.T) {
	defs := definitions(nil)
	// Compiled once: the ambiguity check below matches every example against
	// every pattern, and compiling inside that loop cost 11 s under -race.
	res := make([]*regexp.Regexp, len(defs))
	for i, d := range defs {
		re, err := regexp.Compile(d.pattern)
		if err != nil {
			t.Fatalf("%s: %v", d.pattern, err)
		}
		res[i] = re
	}
	seen := map[string]bool{}
	for i, d := range defs {
		if !res[i].MatchString(d.example) {
			t.Errorf("example %q does not match its pattern %s", d.example, d.pattern)
		}
		if d.doc == "" || strings.Contains(d.doc, "\n") {
			t.Errorf("%s: want a one-line doc", d.pattern)
		}
		if seen[d.pattern] {
			t.Errorf("%s is defined twice", d.pattern)
		}
		seen[d.pattern] = true
		for j, o := range defs {
			if o.pattern != d.pattern && res[j].MatchString(d.example) {
				t.Errorf("example %q is ambiguous: also matches %s", d.example, o.pattern)
			}
		}
	}
}

// TestFeaturesUseOnlyDefinedSteps compiles every feature as godog does
// (Scenario Outlines expanded into their examples) and checks exactly one
// definition matches each step, taking a DocString or table exactly when the
// step has one, so a typo fails fast.
func TestFeaturesUseOnlyDefinedSteps(t *testing.T) {
	defs := definitions(nil)
	var res []*regexp.Regexp
	for _, d := range defs {
		res = append(res, regexp.MustCompile(d.pattern))
	}
	docType, tableType := reflect.TypeOf(&godog.DocString{}), reflect.TypeOf(&godog.Table{})
	lastArg := func(fn any) reflect.Type {
		ft := reflect.TypeOf(fn)
		if ft.NumIn() == 0 {
			return nil
		}
		return ft.In(ft.NumIn() - 1)
	}
	for f, pickles := range featurePickles(t) {
		for _, p := range pickles {
			for _, st := range p.Steps {
				var hits []stepDef
				for i, re := range res {
					if re.MatchString(st.Text) {
						hits = append(hits, defs[i])
					}
				}
				if len(hits) != 1 {
					t.Errorf("%s: %q (scenario %q) matches %d step definitions", filepath.Base(f), st.Text, p.Name, len(hits))
					continue
				}
				last := lastArg(hits[0].fn)
				hasDoc := st.Argument != nil && st.Argument.DocString != nil
				hasTable := st.Argument != nil && st.Argument.DataTable != nil
				if hasDoc != (last == docType) || hasTable != (last == tableType) {
					t.Errorf("%s: %q (scenario %q): the step's DocString/table does not fit its definition %s", filepath.Base(f), st.Text, p.Name, hits[0].pattern)
				}
			}
		}
	}
}

// featurePickles compiles every feature under features/ as godog does
// (Scenario Outlines expanded into their examples): a file's scenarios,
// keyed by its path. A file that does not parse fails the test.
func featurePickles(t *testing.T) map[string][]*messages.Pickle {
	t.Helper()
	dir, err := FeaturesDir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.feature"))
	if len(files) == 0 {
		t.Fatal("no features found")
	}
	out := map[string][]*messages.Pickle{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ids := (&messages.Incrementing{}).NewId
		doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(b), ids)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		out[f] = gherkin.Pickles(*doc, f, ids)
	}
	return out
}
