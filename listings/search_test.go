package listings_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

func TestSearchWords(t *testing.T) {
	long := "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Summarize LEGAL contracts", []string{"summarize", "legal", "contracts"}},
		{"the agent for the win", []string{"agent", "win"}},
		{"application/pdf, text-to-speech & W-2 forms", []string{"application", "pdf", "text", "speech", "w", "2", "forms"}},
		{"Résumé Ünïcode ÉCOLE", []string{"résumé", "ünïcode", "école"}},
		{"%_*'\"", nil},
		{"gpt4o v2.1", []string{"gpt4o", "v2", "1"}},
		{long, []string{long[:listings.MaxWordLen]}},
	}
	for _, tc := range cases {
		if got := listings.SearchWords(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("SearchWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestQueryWordsAndDefaultSort(t *testing.T) {
	q := listings.Query{Text: "  Legal legal CONTRACTS the a b c d e f g h i  "}
	if err := q.Normalize(); err != nil {
		t.Fatal(err)
	}
	if got, want := q.Words(), []string{"legal", "contracts", "b", "c", "d", "e", "f", "g"}; !slices.Equal(got, want) {
		t.Errorf("Words = %q, want %q (distinct, stop words out, at most %d)", got, want, listings.MaxSearchWords)
	}
	if q.Sort != "relevance" {
		t.Errorf("default sort with text = %q, want relevance", q.Sort)
	}
	for _, text := range []string{"", "the", "%%"} {
		q := listings.Query{Text: text}
		if err := q.Normalize(); err != nil || q.Sort != "name" {
			t.Errorf("default sort for text %q = %q, %v; want name", text, q.Sort, err)
		}
	}
	q = listings.Query{Text: "legal", Sort: "-price"}
	if err := q.Normalize(); err != nil || q.Sort != "-price" {
		t.Errorf("an explicit sort is kept: %q, %v", q.Sort, err)
	}
}

func TestOneEdit(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"summarize", "summarize", false},
		{"sumarize", "summarize", true},  // inserted
		{"summarize", "sumarize", true},  // deleted
		{"summarixe", "summarize", true}, // substituted
		{"smumarize", "summarize", true}, // swapped
		{"summarzie", "summarize", true}, // swapped at the end
		{"smmarise", "summarize", false}, // two edits
		{"summarize", "summarizer", true},
		{"summarize", "summarizers", false},
		{"école", "ecole", true},
		{"ab", "ba", true},
		{"abc", "cba", false},
		{"", "a", true},
		{"", "", false},
	}
	for _, tc := range cases {
		if got := listings.OneEdit(tc.a, tc.b); got != tc.want {
			t.Errorf("OneEdit(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// osa is the optimal string alignment distance, by the textbook dynamic
// program: the reference OneEdit and Variants are checked against.
func osa(a, b []rune) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range b {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// TestTypoMatchingIsComplete: for random pairs of words, OneEdit agrees
// with the edit distance, and two words one edit apart always share a
// variant, so looking a query word's variants up in the stored ones finds
// every listing word one edit away.
func TestTypoMatchingIsComplete(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcé")
	word := func() []rune {
		w := make([]rune, r.IntN(7))
		for i := range w {
			w[i] = alphabet[r.IntN(len(alphabet))]
		}
		return w
	}
	edit := func(w []rune) []rune {
		w = slices.Clone(w)
		switch k := r.IntN(4); {
		case k == 0 || len(w) == 0:
			return slices.Insert(w, r.IntN(len(w)+1), alphabet[r.IntN(len(alphabet))])
		case k == 1:
			i := r.IntN(len(w))
			return slices.Delete(w, i, i+1)
		case k == 2:
			w[r.IntN(len(w))] = alphabet[r.IntN(len(alphabet))]
		default:
			if i := r.IntN(len(w)); i+1 < len(w) {
				w[i], w[i+1] = w[i+1], w[i]
			}
		}
		return w
	}
	near := 0
	for range 20000 {
		a := word()
		b := edit(a)
		if r.IntN(3) == 0 {
			b = word()
		}
		d := osa(a, b)
		if got := listings.OneEdit(string(a), string(b)); got != (d == 1) {
			t.Fatalf("OneEdit(%q, %q) = %v, distance %d", string(a), string(b), got, d)
		}
		if d <= 1 {
			near++
			va, vb := listings.Variants(string(a)), listings.Variants(string(b))
			if !slices.ContainsFunc(va, func(v string) bool { return slices.Contains(vb, v) }) {
				t.Fatalf("%q and %q are %d edit apart but share no variant: %q, %q", string(a), string(b), d, va, vb)
			}
		}
	}
	if near < 5000 {
		t.Fatalf("only %d pairs were near: the generator is off", near)
	}
}

func TestVariants(t *testing.T) {
	if got, want := listings.Variants("abca"), []string{"aba", "abc", "abca", "aca", "bca"}; !slices.Equal(got, want) {
		t.Errorf("Variants(abca) = %q, want %q", got, want)
	}
	long := fmt.Sprintf("%0*d", listings.MaxVariantLen+1, 7)
	if got := listings.Variants(long); got != nil {
		t.Errorf("a word longer than %d has variants %q", listings.MaxVariantLen, got)
	}
}

func TestSearchDocAndFacets(t *testing.T) {
	card, err := agentcard.Parse([]byte(`{"name": "Contract Summarizer", "description": "Condenses the contracts.",
		"supportedInterfaces": [{"url": "https://a.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
		"version": "1", "capabilities": {"streaming": true},
		"defaultInputModes": ["Application/PDF"], "defaultOutputModes": ["text/plain"],
		"skills": [{"id": "sum-up", "name": "Sum up", "description": "One page.", "tags": ["Legal", "legal", "real estate"],
			"outputModes": ["application/json"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	l := &listings.Listing{Status: listings.StatusPublished, Card: card, Plan: listings.Plan{Currency: "usd"}}
	d := l.SearchDoc()
	if !slices.Equal(d.Name, []string{"contract", "summarizer"}) || !slices.Equal(d.Skills, []string{"sum", "up", "sum", "up", "legal", "legal", "real", "estate"}) ||
		!slices.Equal(d.Description, []string{"condenses", "contracts", "one", "page"}) {
		t.Errorf("words: %+v", d)
	}
	f := listings.Facet
	want := []string{f('s', "published"), f('c', "usd"), f('i', "application/pdf"), f('k', "sum up"), f('k', "sum-up"), f('m', "1"),
		f('o', "application/json"), f('o', "text/plain"), f('p', "0"), f('t', "legal"), f('t', "real estate")}
	slices.Sort(want[2:])
	if !slices.Equal(d.Facets, want) {
		t.Errorf("facets\n got  %q\n want %q", d.Facets, want)
	}
	if got := f('t', " Real Estate "); got != "zt7265616c20657374617465" {
		t.Errorf("Facet = %q", got)
	}
	if got, want := d.Terms(), []string{"condenses", "contract", "contracts", "estate", "legal", "one", "page", "real", "sum", "summarizer", "up"}; !slices.Equal(got, want) {
		t.Errorf("Terms = %q, want %q", got, want)
	}

	tr := true
	q := listings.Query{Statuses: []listings.Status{listings.StatusDraft, listings.StatusPublished, listings.StatusDraft}, Tag: "legal",
		Skill: "sum up", InputMode: "application/pdf", Streaming: &tr, Currency: "USD"}
	groups := q.FacetGroups()
	wantGroups := [][]string{{f('s', "draft"), f('s', "published")}, {f('k', "sum up")}, {f('t', "legal")}, {f('i', "application/pdf")},
		{f('c', "usd")}, {f('m', "1")}}
	if fmt.Sprint(groups) != fmt.Sprint(wantGroups) {
		t.Errorf("FacetGroups\n got  %q\n want %q", groups, wantGroups)
	}
	for _, g := range groups {
		if !slices.ContainsFunc(g, func(tok string) bool { return slices.Contains(d.Facets, tok) }) {
			t.Errorf("the listing lacks every token of group %q", g)
		}
	}
}
