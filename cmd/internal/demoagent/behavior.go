package demoagent

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

type behavior struct {
	name, description           string
	skillName, skillDescription string
	artifactName                string
	model                       string
	tags, examples              []string
	produce                     func(words []string) string
}

var behaviors = map[Behavior]behavior{
	Summarize: {
		name:             "Summarizer",
		description:      "Condenses a text to its opening words. A deterministic demo agent: no model behind it.",
		skillName:        "Summarize text",
		skillDescription: "Returns how many words the text has and its first 12 words.",
		artifactName:     "summary",
		model:            "demo-summarizer-1",
		tags:             []string{"summarization", "text", "demo"},
		examples:         []string{"Summarize: the quarterly report shows revenue up four percent on strong demand."},
		produce:          summarize,
	},
	Translate: {
		name:             "Translator",
		description:      "Translates text into Demo, a language that looks remarkably like upper-case English. A deterministic demo agent.",
		skillName:        "Translate to Demo",
		skillDescription: "Returns the text translated into Demo, word by word.",
		artifactName:     "translation",
		model:            "demo-translator-1",
		tags:             []string{"translation", "text", "demo"},
		examples:         []string{"Good morning, how are you?"},
		produce:          translate,
	},
	ExtractInvoice: {
		name:             "Invoice extractor",
		description:      "Finds the amounts in an invoice's text and totals them. A deterministic demo agent.",
		skillName:        "Extract invoice amounts",
		skillDescription: "Lists how many amounts the text contains (numbers with cents or a currency sign: not the invoice number), their total and the largest.",
		artifactName:     "extraction",
		model:            "demo-invoice-extractor-1",
		tags:             []string{"invoices", "finance", "extraction", "demo"},
		examples:         []string{"Invoice 17: consulting 1200.00, travel $310.50, VAT 302.10"},
		produce:          extractInvoice,
	},
}

// question is what a task that says "clarify" asks before going on.
const question = "What should I focus on? Reply in this task to continue."

const summaryWords = 12

func summarize(words []string) string {
	head := words[:min(len(words), summaryWords)]
	s := fmt.Sprintf("Summary of %d words: %s", len(words), strings.Join(head, " "))
	if len(words) > len(head) {
		s += "…"
	}
	return s
}

func translate(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strings.ToUpper(w)
	}
	return "Demo translation: " + strings.Join(out, " ")
}

// extractInvoice sums the amounts in integer cents: money is never a
// float. An amount is a number written as money: with cents (800.00,
// 310.5) or a currency sign ($800); a bare whole number is an invoice
// number, a quantity or a count of days, not an amount.
func extractInvoice(words []string) string {
	var n int
	var total, largest int64
	for _, w := range words {
		c, ok := parseAmount(w)
		if !ok {
			continue
		}
		n++
		total += c
		largest = max(largest, c)
	}
	noun := "amounts"
	if n == 1 {
		noun = "amount"
	}
	return fmt.Sprintf("Invoice extraction: %d %s, total %s, largest %s.", n, noun, formatCents(total), formatCents(largest))
}

// parseAmount reads "1200.00", "310.5", "$310", "1,200.00" or "302.10,"
// as cents; "17", "#17" or "30" are no amount.
func parseAmount(w string) (int64, bool) {
	w = strings.TrimRight(w, ",;:.)")
	bare := strings.TrimLeft(w, "$€£")
	signed := len(bare) < len(w)
	whole, frac, hasFrac := strings.Cut(bare, ".")
	if !signed && !hasFrac {
		return 0, false
	}
	whole, ok := ungroup(whole)
	if !ok || len(whole) > 12 || (hasFrac && (frac == "" || len(frac) > 2)) {
		return 0, false
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	units, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, false
	}
	var cents int64
	if hasFrac {
		cents, _ = strconv.ParseInt(frac, 10, 64)
		if len(frac) == 1 {
			cents *= 10
		}
	}
	return units*100 + cents, true
}

// ungroup removes thousands separators ("1,200" → "1200"), which must
// stand every three digits; ok is false when they do not.
func ungroup(whole string) (string, bool) {
	groups := strings.Split(whole, ",")
	if len(groups) == 1 {
		return whole, whole != ""
	}
	for i, g := range groups {
		if len(g) != 3 && (i > 0 || g == "" || len(g) > 3) {
			return "", false
		}
	}
	return strings.Join(groups, ""), true
}

func formatCents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

// hasWord reports whether text contains word, ignoring case and the
// punctuation around it.
func hasWord(text, word string) bool {
	for _, w := range strings.Fields(text) {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if strings.EqualFold(w, word) {
			return true
		}
	}
	return false
}

// split cuts words into n chunks of near-equal size whose concatenation is
// the words joined by single spaces: every chunk after the first starts with
// the space that separates it from the one before.
func split(words []string, n int) []string {
	n = max(1, min(n, len(words)))
	out := make([]string, 0, n)
	for i := range n {
		s := strings.Join(words[i*len(words)/n:(i+1)*len(words)/n], " ")
		if i > 0 {
			s = " " + s
		}
		out = append(out, s)
	}
	return out
}
