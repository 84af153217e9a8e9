package coordinator

// Cheap reads of the state for the API and the metrics: they skip the checkpoint, which can
// be large.

// stateCounts returns the number of jobs in each state.
func (f *fsm) stateCounts() map[JobState]int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[JobState]int{}
	for _, e := range f.st.jobs {
		out[e.job.State]++
	}
	return out
}

// view returns a copy of job j without its checkpoint.
func view(j *Job) Job {
	v := *j
	v.Checkpoint = nil
	return v.clone()
}

// jobView returns job id without its checkpoint.
func (f *fsm) jobView(id string) (Job, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, err := f.st.get(id)
	if err != nil {
		return Job{}, err
	}
	return view(&e.job), nil
}

// jobViews returns every job without its checkpoint, ordered by CreatedAt, then ID.
func (f *fsm) jobViews() []Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Job, 0, len(f.st.jobs))
	for _, e := range f.st.sortedEntries() {
		out = append(out, view(&e.job))
	}
	return out
}
