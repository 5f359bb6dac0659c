// Command chart-schema writes the Helm chart's values.schema.json from the Go types of its
// values (package chartvalues): `cd deploy && go run ./chartvalues/cmd/chart-schema`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/webpush-gateway/webpush-gateway/deploy/chartvalues"
)

func main() {
	out := flag.String("out", "helm/webpush-gateway/values.schema.json", "file to write, relative to deploy/")
	flag.Parse()
	s, err := chartvalues.Schema()
	if err == nil {
		err = os.WriteFile(*out, s, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart-schema:", err)
		os.Exit(1)
	}
}
