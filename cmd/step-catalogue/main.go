// Command step-catalogue rewrites features/README.md from the step
// definitions: go generate ./sim/steps, or go run ./cmd/step-catalogue from
// anywhere inside the module.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zooid-dev/zooid/sim/steps"
)

func main() {
	dir, err := steps.FeaturesDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "catalogue:", err)
		os.Exit(1)
	}
	var b bytes.Buffer
	if err := steps.WriteCatalogue(&b); err != nil {
		fmt.Fprintln(os.Stderr, "catalogue:", err)
		os.Exit(1)
	}
	path := filepath.Join(dir, "README.md")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "catalogue:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", path)
}
