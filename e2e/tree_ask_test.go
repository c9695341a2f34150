package e2e

import (
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// A decision tree asks a person through a node tagged ask (issue 27).

const askPetsChart = `Id,Name,Shape Library,Page ID,Contained By,Group,Line Source,Line Destination,Source Arrow,Destination Arrow,Tags,Status,Text Area 1,Comments,timeout
1,Document,,,,,,,,,,Draft,Pets,,
2,Page,,,,,,,,,,,Page 1,,
3,Terminator,Flowchart Shapes/Containers,2,,,,,,,,,Start,,
4,Process,Flowchart Shapes/Containers,2,,,,,,,,,Create cats.txt about this cat: {{message}},,
5,Process,Flowchart Shapes/Containers,2,,,,,,,ask,,Add a dog too?,,
6,Process,Flowchart Shapes/Containers,2,,,,,,,,,Create dogs.txt about a dog,,
7,Terminator,Flowchart Shapes/Containers,2,,,,,,,,,End,,
8,Terminator,Flowchart Shapes/Containers,2,,,,,,,,,End,,
9,Line,,2,,,5,6,None,Arrow,,,yes,,
10,Line,,2,,,5,7,None,Arrow,,,no,,
11,Line,,2,,,4,5,None,Arrow,,,,,
12,Line,,2,,,3,4,None,Arrow,,,,,
13,Line,,2,,,6,8,None,Arrow,,,,,
`

// TestTreeAskNode: the tree's question waits with the route labels as
// options; after the reply the walk goes on at the chosen route, without
// asking the AI for the cat again.
func TestTreeAskNode(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p, calls := treeProject(t, binary, "max_retries: 1\n", askPetsChart, strings.Replace(petsAI, `if [ "$DECREE_TREE_NODE" = 6 ] && ! grep -q bark dogs.txt; then`, `if false; then`, 1))
	r := p.ctl("", "run", "-m", "pets", "-p", "a tabby", "-v", "routine=pets")
	mustCode(t, r, 3)
	w := p.waits()
	if len(w.Waits) != 1 || w.Waits[0].Question != "Add a dog too?" || len(w.Waits[0].Options) != 2 || w.Waits[0].Options[0].Name != "yes" {
		t.Fatalf("waits = %+v\n%s", w, r)
	}
	mustCode(t, p.ctl("", "reply", w.Waits[0].ID, "yes"), 0)
	mustCode(t, p.ctl("", "process"), 0)
	if got := strings.Join(callNames(t, calls), " "); got != "run-4 validate-4 run-6 validate-6" {
		t.Errorf("CLI calls %s: the cat was made once, the dog after the reply", got)
	}
	p.sameTree(map[string]string{
		"cats.txt": "Create cats.txt about this cat: a tabby\n",
		"dogs.txt": "woof (run)\n",
	})
}
