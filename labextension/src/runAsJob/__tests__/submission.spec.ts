import {
  createRequest,
  defaultJobName,
  executedNotebookPath,
  hasOutput,
  isJobOutput,
  notebookStem,
  rerunName
} from '../submission';
import { makeJob } from '../../__tests__/jobs.fixture';

describe('job names', () => {
  it('takes the notebook’s name without folder and extension', () => {
    expect(notebookStem('project/train.ipynb')).toBe('train');
    expect(notebookStem('Untitled.IPYNB')).toBe('Untitled');
  });

  it('starts the dialog with the notebook’s name and the local time', () => {
    const now = new Date(2024, 4, 6, 9, 5);
    expect(defaultJobName('project/train.ipynb', now)).toBe(
      'train 2024-05-06 09:05'
    );
  });

  it('keeps the default name within the server’s 100 characters', () => {
    const name = defaultJobName(`${'x'.repeat(150)}.ipynb`, new Date());
    expect(name.length).toBeLessThanOrEqual(100);
  });
});

describe('createRequest, from the dialog to the API', () => {
  const form = {
    inputPath: 'project/train.ipynb',
    name: '  train run  ',
    flavor: 'quarter-4090',
    parameters: { epochs: 20 },
    deadlineMinutes: 45,
    html: true,
    idempotencyToken: 'token-1'
  };

  it('sends the CreateJob fields, with the deadline in seconds', () => {
    expect(createRequest(form)).toEqual({
      input_path: 'project/train.ipynb',
      name: 'train run',
      flavor: 'quarter-4090',
      parameters: { epochs: 20 },
      deadline_seconds: 2700,
      output_formats: ['ipynb', 'html'],
      idempotency_token: 'token-1'
    });
  });

  it('asks for the notebook only without HTML, and leaves out what is unset', () => {
    const request = createRequest({
      ...form,
      name: ' ',
      flavor: null,
      deadlineMinutes: null,
      html: false
    });
    expect(request.output_formats).toEqual(['ipynb']);
    expect(request.name).toBeNull();
    expect(request.flavor).toBeNull();
    expect(request.deadline_seconds).toBeNull();
  });
});

describe('rerunName, the name a rerun starts with', () => {
  it('is the name with the next free number', () => {
    expect(rerunName('run1', ['run1'])).toBe('run1 (2)');
    expect(rerunName('run1', ['run1', 'run1 (2)', 'run1 (3)'])).toBe(
      'run1 (4)'
    );
  });

  it('counts on from a rerun’s own number instead of adding another', () => {
    expect(rerunName('run1 (2)', ['run1', 'run1 (2)'])).toBe('run1 (3)');
  });

  it('stays within the longest name a job may have', () => {
    const long = 'x'.repeat(100);
    const name = rerunName(long, [long]);
    expect(name).toHaveLength(100);
    expect(name.endsWith(' (2)')).toBe(true);
  });
});

describe('createRequest for a rerun', () => {
  it('names the job it reruns, and keeps its cell timeout and kernel', () => {
    const request = createRequest({
      inputPath: 'project/train.ipynb',
      name: 'train (2)',
      flavor: 'quarter-4090',
      parameters: { lr: 0.5 },
      deadlineMinutes: 30,
      html: true,
      idempotencyToken: 'token-2',
      rerunOf: makeJob({ cell_timeout_seconds: 600 })
    });
    expect(request).toMatchObject({
      name: 'train (2)',
      parameters: { lr: 0.5 },
      cell_timeout_seconds: 600,
      kernel_name: 'python3',
      // so that a job that is not the viewer's is refused as such
      rerun_of: '3f2a1b4c-0000-4000-8000-000000000001'
    });
  });
});

describe('executedNotebookPath, where Open saves the executed notebook', () => {
  it('is job-outputs/<name>-<first 8 of the id>.ipynb', () => {
    expect(
      executedNotebookPath({ job_id: '3f2a1b4c-9999', name: 'train' })
    ).toBe('job-outputs/train-3f2a1b4c.ipynb');
  });

  it('keeps only safe characters of the name', () => {
    expect(
      executedNotebookPath({
        job_id: 'abcdef123456',
        name: 'Élan: lr=0.1 / 20 epochs'
      })
    ).toBe('job-outputs/Elan-lr-0.1-20-epochs-abcdef12.ipynb');
    expect(executedNotebookPath({ job_id: 'abcdef12', name: '../..' })).toBe(
      'job-outputs/job-abcdef12.ipynb'
    );
  });
});

describe('hasOutput', () => {
  it('tells which outputs a job has written', () => {
    const job = makeJob({
      outputs: [{ name: 'train.ipynb', format: 'ipynb', size: 10 }]
    });
    expect(hasOutput(job, 'ipynb')).toBe(true);
    expect(hasOutput(job, 'html')).toBe(false);
  });
});

describe('isJobOutput, which keeps results out of a pipeline’s stages', () => {
  it('is true for the executed notebooks Open saves into job-outputs/', () => {
    const saved = executedNotebookPath({
      job_id: '15fd98fa-0000',
      name: 'loop run1'
    });
    expect(saved).toBe('job-outputs/loop-run1-15fd98fa.ipynb');
    expect(isJobOutput(saved)).toBe(true);
    expect(isJobOutput('job-outputs/2-loop-run1-15fd98fa.ipynb')).toBe(true);
    expect(isJobOutput('/job-outputs/old/report-3f2a1b4c.ipynb')).toBe(true);
  });

  it('is false for the notebooks people write', () => {
    expect(isJobOutput('loop.ipynb')).toBe(false);
    expect(isJobOutput('project/job-outputs-notes.ipynb')).toBe(false);
    expect(isJobOutput('project/job-outputs/train.ipynb')).toBe(false);
  });
});
