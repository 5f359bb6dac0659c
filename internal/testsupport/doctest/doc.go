// Package doctest reads the examples out of the Markdown docs, so tests run or load them as a
// user would and the docs cannot drift from what works.
package doctest
