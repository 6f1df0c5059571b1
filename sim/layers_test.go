// Package sim_test holds the rule that keeps the repository one tree whose
// imports all point down (docs/ARCHITECTURE.md, "Layers").
package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/zooid-dev/zooid"

// layer names where a package of the module sits, lowest first.
type layer int

const (
	leaf    layer = iota // internal/: helpers that import nothing of the module but each other
	product              // zooid/: the daemon
	double               // the test doubles and fixtures' formats beside fakehs, and Synapse's module
	harness              // sim/: the world and steps, runner, replay, bench, the sim command
	command              // cmd/: thin mains
)

var layerNames = []string{"internal (leaves)", "zooid (product)", "test doubles", "sim (harness)", "cmd"}

func (l layer) String() string { return layerNames[l] }

// layerOf places a package by its folder; ok is false for one the rule does
// not know, which the test reports rather than lets through.
func layerOf(pkg string) (layer, bool) {
	rel, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return 0, false
	}
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "internal":
		return leaf, true
	case "zooid":
		return product, true
	case "fakehs", "fakeagent", "modeldouble", "busyroom", "docker":
		return double, true
	case "sim":
		return harness, true
	case "cmd":
		return command, true
	}
	return 0, false
}

// allowed says whether a package of layer from may import one of layer to:
// downward, or within its own layer; leaves only among themselves.
func allowed(from, to layer) bool {
	if from == leaf {
		return to == leaf
	}
	return to <= from
}

type goPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func listModule(t *testing.T) []goPackage {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportsPointDown: no package imports one of a higher layer. A test of
// the product may use the doubles and leaves (zooid/daemon's tests start the
// scripted agent), never the harness; every other test follows its
// package's rule.
func TestImportsPointDown(t *testing.T) {
	pkgs := listModule(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of %s: the rule below would prove nothing", len(pkgs), module)
	}
	var bad []string
	check := func(from goPackage, imports []string, test bool) {
		fl, ok := layerOf(from.ImportPath)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is in no layer: place its folder in docs/ARCHITECTURE.md and in layerOf", from.ImportPath))
			return
		}
		for _, imp := range imports {
			tl, ok := layerOf(imp)
			if !ok {
				continue // not the module's
			}
			if allowed(fl, tl) || (test && fl == product && (tl == double || tl == leaf)) {
				continue
			}
			what := "imports"
			if test {
				what = "'s tests import"
			}
			bad = append(bad, fmt.Sprintf("%s (%s) %s %s (%s)", strings.TrimPrefix(from.ImportPath, module+"/"), fl, what, strings.TrimPrefix(imp, module+"/"), tl))
		}
	}
	for _, p := range pkgs {
		check(p, p.Imports, false)
		check(p, append(p.TestImports, p.XTestImports...), true)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestTheRuleCanFail: the rule refuses each kind of upward import.
func TestTheRuleCanFail(t *testing.T) {
	for _, c := range []struct{ from, to layer }{
		{leaf, product}, {leaf, double}, {product, double}, {product, harness}, {double, harness}, {harness, command},
	} {
		if allowed(c.from, c.to) {
			t.Errorf("%s may import %s", c.from, c.to)
		}
	}
	for _, c := range []struct{ from, to layer }{
		{product, leaf}, {double, product}, {harness, double}, {command, harness}, {harness, harness},
	} {
		if !allowed(c.from, c.to) {
			t.Errorf("%s may not import %s", c.from, c.to)
		}
	}
}
