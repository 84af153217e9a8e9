package store

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

// JobView returns job id from this node's state without its checkpoint (ErrJobNotFound if
// there is none): the cheap read of the API.
func (n *Node) JobView(id string) (Job, error) { return n.fsm.jobView(id) }

// JobViews returns every job in this node's state without its checkpoint, ordered by
// CreatedAt, then ID.
func (n *Node) JobViews() []Job { return n.fsm.jobViews() }

// Events returns job id's recorded events from number from on (those still held: the last
// 500) and the number to ask for next.
func (n *Node) Events(id string, from uint64) ([]Event, uint64, error) { return n.fsm.events(id, from) }

// Updates returns a channel closed when this node's state applies its next command: wait on
// it, then read again, to follow the state.
func (n *Node) Updates() <-chan struct{} { return n.fsm.updates() }

// MemberAPI returns the API address of coordinator id from this node's state, "" if unknown.
func (n *Node) MemberAPI(id string) string { return n.fsm.memberAPI(id) }
