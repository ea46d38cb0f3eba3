package web

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"unicode/utf8"
)

// Charts are SVG drawn here, inline in the page: readable without
// JavaScript, and each carries a title and description for screen
// readers (the same figures are in a table next to it). Only geometry
// uses floats; the amounts shown are formatted from integers.

type point struct {
	Label   string // the bar's name (a day, an agent)
	Value   int64  // micros
	Display string // the value as shown (an amount: to the cent)
	Exact   string // the value exactly, on hover ("" : Display)
	Href    string
}

// hover is what a bar's title says: the exact value.
func (p point) hover() string {
	if p.Exact != "" {
		return p.Exact
	}
	return p.Display
}

func esc(s string) string { return html.EscapeString(s) }

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// trendChart draws one column per point (a day), with the axis labelled
// at zero, half and the maximum; the maximum is least at the least (two
// of the currency's minor units, so that the half is one: never $0.002).
func trendChart(id, title, desc string, pts []point, format func(int64) string, least int64) template.HTML {
	const w, h, left, right, top, bottom = 560.0, 220.0, 78.0, 8.0, 12.0, 30.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="%s-t %s-d" xmlns="http://www.w3.org/2000/svg">`, w, h, id, id)
	fmt.Fprintf(&b, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, id, esc(title), id, esc(desc))
	var maxV int64
	for _, p := range pts {
		maxV = max(maxV, p.Value)
	}
	maxV = niceMax(max(maxV, least)) // ticks at round values: $0.02 and $0.04, not $0.014859
	plotW, plotH := w-left-right, h-top-bottom
	for i, v := range []int64{0, maxV / 2, maxV} { // maxV·i/2 could overflow
		y := top + plotH - plotH*float64(i)/2
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c9ced6" stroke-width="1"/>`, left, w-right, y, y)
		if maxV > 0 || i == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="12" fill="#374151">%s</text>`, left-6, y+4, esc(format(v)))
		}
	}
	if len(pts) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13" fill="#374151">No usage in this period</text></svg>`, left+plotW/2, top+plotH/2)
		return template.HTML(b.String())
	}
	slot := plotW / float64(len(pts))
	barW := max(slot*0.75, 1)
	every := max(1, (len(pts)+5)/6)
	for i, p := range pts {
		x := left + slot*float64(i) + (slot-barW)/2
		bh := 0.0
		if maxV > 0 {
			bh = plotH * float64(p.Value) / float64(maxV)
		}
		if p.Value > 0 && bh < 1 {
			bh = 1
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2456a6"><title>%s: %s</title></rect>`,
			x, top+plotH-bh, barW, bh, esc(p.Label), esc(p.hover()))
		if i%every == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="12" fill="#374151">%s</text>`,
				left+slot*float64(i)+slot/2, h-10, esc(shortDay(p.Label)))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceMax is the axis's top for values up to v: the least of 2, 4 and 10
// times a power of ten that is at least v, so that the top and its half
// (1, 2, 5 times a power of ten) are round. v itself past that range.
func niceMax(v int64) int64 {
	if v <= 0 {
		return 0
	}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		for _, m := range []int64{2, 4, 10} {
			if m*p >= v {
				return m * p
			}
		}
	}
	return v
}

// shortDay turns "2026-11-03" into "Nov 3" for axis labels.
func shortDay(s string) string {
	months := []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	var y, m, d int
	if n, _ := fmt.Sscanf(s, "%d-%d-%d", &y, &m, &d); n != 3 || m < 1 || m > 12 {
		return s
	}
	return fmt.Sprintf("%s %d", months[m-1], d)
}

// barChart draws one horizontal bar per point (an agent), largest first,
// with its name and value.
func barChart(id, title, desc string, pts []point) template.HTML {
	const w, labelW, valueW, rowH, pad = 560.0, 170.0, 110.0, 28.0, 6.0
	h := rowH*float64(max(len(pts), 1)) + pad*2
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="%s-t %s-d" xmlns="http://www.w3.org/2000/svg">`, w, h, id, id)
	fmt.Fprintf(&b, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, id, esc(title), id, esc(desc))
	if len(pts) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13" fill="#374151">No usage in this period</text></svg>`, w/2, h/2+4)
		return template.HTML(b.String())
	}
	var maxV int64
	for _, p := range pts {
		maxV = max(maxV, p.Value)
	}
	barArea := w - labelW - valueW
	for i, p := range pts {
		y := pad + rowH*float64(i)
		bw := 0.0
		if maxV > 0 {
			bw = barArea * float64(p.Value) / float64(maxV)
		}
		if p.Value > 0 && bw < 1 {
			bw = 1
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="13" fill="#1f2937">%s</text>`, labelW-8, y+rowH/2+4, esc(truncate(p.Label, 24)))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="#2456a6"><title>%s: %s</title></rect>`,
			labelW, y+5, bw, rowH-10, esc(p.Label), esc(p.hover()))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="13" fill="#1f2937">%s</text>`, labelW+bw+6, y+rowH/2+4, esc(p.Display))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
