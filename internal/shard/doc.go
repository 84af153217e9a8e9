// Package shard reads training data and cuts it into the fixed shards a job runs over: CSV
// files with or without a header (whole, or as byte ranges aligned to line starts), the UCI
// layout of ../shared/data with its fixed train/test splits, and in-memory tables. Every
// parse error names the file, line and column and says what to change (see ParseError).
//
// The standardization pass is MomentsTask, an engine task whose merged moments give a
// Transform by NewTransform. SharedDataDir finds the shared test data for tests.
package shard
