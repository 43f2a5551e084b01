// Package mdlinks checks the relative links of Markdown files: that each
// linked file exists and that each #anchor names a heading (or an
// explicit <a id>/<a name>) of the file it points into, with the anchors
// GitHub renders. Its test runs it over README.md, SECURITY.md,
// CONTRIBUTING.md and docs/*.md, so a renamed heading or moved page fails
// the suite instead of a reader.
//
// Files: doc.go (this), anchors.go (headings to anchors), links.go (links
// and the check).
//
// References: CommonMark 0.31 (inline links, link reference definitions,
// ATX headings, fenced code blocks); GitHub Flavored Markdown as rendered
// by github.com (heading anchors: lower case, punctuation dropped, spaces
// to hyphens, "-1", "-2" for repeats).
package mdlinks
