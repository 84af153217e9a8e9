package gpreducev1

// Finished reports whether s is a final job state (succeeded, failed or canceled), one a job
// never leaves. It is the one definition of a finished job: the coordinator's replicated
// state, its API and the CLI all ask it.
func (s JobState) Finished() bool {
	return s == JobState_JOB_STATE_SUCCEEDED || s == JobState_JOB_STATE_FAILED || s == JobState_JOB_STATE_CANCELED
}
