"""The run and job machinery: the supervisor (no Gradio in it), wrappers, reports, logs and the job panel."""
