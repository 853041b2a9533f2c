import { ServerConnection } from '@jupyterlab/services';

import {
  createdJobFrom,
  featuresOf,
  flavorsFrom,
  JobsAPI,
  parametersFrom,
  UNREADABLE_FLAVORS,
  UNREADABLE_JOB
} from '../api';
import { JobAPIError } from '../errors';
import { makeFlavor, makeJob } from '../../__tests__/jobs.fixture';

interface IRecorded {
  method: string;
  url: string;
  body: string | null;
}

/**
 * A JobsAPI on a fake server: `answer` gives the response for each request, and
 * every request is recorded.
 */
function fakeServer(answer: (request: IRecorded) => Response) {
  const requests: IRecorded[] = [];
  const fetch = async (input: RequestInfo, init?: RequestInit) => {
    const request = input as Request;
    const recorded = {
      method: request.method ?? init?.method ?? 'GET',
      url: request.url ?? String(input),
      body: request.body ? await request.text() : null
    };
    requests.push(recorded);
    return answer(recorded);
  };
  const serverSettings = ServerConnection.makeSettings({
    baseUrl: 'http://hub.example/user/ana/',
    fetch: fetch as typeof window.fetch
  });
  return { api: new JobsAPI(serverSettings), requests };
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' }
  });
}

describe('JobsAPI, the calls the extension makes', () => {
  it('lists jobs under the user’s server with the query it was given', async () => {
    const { api, requests } = fakeServer(() =>
      json({ jobs: [makeJob()], next_token: null, total_count: 1 })
    );
    const page = await api.listJobs({
      status: 'RUNNING',
      name: '',
      sort_by: 'name',
      max_items: 20
    });
    expect(page.total_count).toBe(1);
    expect(requests[0].method).toBe('GET');
    expect(requests[0].url).toBe(
      'http://hub.example/user/ana/jupyter-to-job/api/jobs?status=RUNNING&sort_by=name&max_items=20'
    );
  });

  it('sends no cache-busting timestamp the strict query models would refuse', async () => {
    const { api, requests } = fakeServer(() =>
      json({ jobs: [], next_token: null, total_count: 0 })
    );
    await api.listJobs({});
    await api.getConfig();
    expect(requests.map(request => request.url)).toEqual([
      'http://hub.example/user/ana/jupyter-to-job/api/jobs',
      'http://hub.example/user/ana/jupyter-to-job/api/config'
    ]);
  });

  it('follows next_token over pages for the recent jobs, newest first', async () => {
    const { api, requests } = fakeServer(request =>
      request.url.includes('next_token=p2')
        ? json({
            jobs: [makeJob({ job_id: 'j-2' })],
            next_token: null,
            total_count: 2
          })
        : json({
            jobs: [makeJob({ job_id: 'j-1' })],
            next_token: 'p2',
            total_count: 2
          })
    );
    const all = await api.listRecentJobs();
    expect(all.jobs.map(job => job.job_id)).toEqual(['j-1', 'j-2']);
    expect(all.total_count).toBe(2);
    expect(requests).toHaveLength(2);
    expect(requests[0].url).toContain(
      'sort_by=create_time&sort_order=desc&max_items=100'
    );
  });

  it('creates a job with a POST of the CreateJob body and returns the job', async () => {
    const job = makeJob({ status: 'QUEUED' });
    const { api, requests } = fakeServer(() =>
      json({ job_id: job.job_id, created: true, job }, 201)
    );
    const created = await api.createJob({
      input_path: 'project/train.ipynb',
      idempotency_token: 'token-1'
    });
    expect(created).toEqual(job);
    expect(requests[0].method).toBe('POST');
    expect(JSON.parse(requests[0].body!)).toEqual({
      input_path: 'project/train.ipynb',
      idempotency_token: 'token-1'
    });
  });

  it('stops with a PATCH to STOPPED and deletes with a DELETE', async () => {
    const { api, requests } = fakeServer(request =>
      request.method === 'DELETE'
        ? new Response(null, { status: 204 })
        : json(makeJob({ status: 'STOPPING' }))
    );
    await api.stopJob('job/1');
    await api.deleteJob('job/1');
    expect(requests.map(r => [r.method, r.url, r.body])).toEqual([
      [
        'PATCH',
        'http://hub.example/user/ana/jupyter-to-job/api/jobs/job%2F1',
        '{"status":"STOPPED"}'
      ],
      [
        'DELETE',
        'http://hub.example/user/ana/jupyter-to-job/api/jobs/job%2F1',
        null
      ]
    ]);
  });

  it('reads the log from an offset, and the parameters of a notebook', async () => {
    const { api, requests } = fakeServer(request =>
      request.url.includes('/logs')
        ? json({
            job_id: 'j',
            offset: 10,
            next_offset: 20,
            size: 20,
            data: 'x',
            complete: false
          })
        : json({ path: 'a b.ipynb', parameters: [] })
    );
    await api.getLog('j', 10, 4096);
    await api.getParameters('a b.ipynb');
    expect(requests[0].url).toBe(
      'http://hub.example/user/ana/jupyter-to-job/api/jobs/j/logs?offset=10&limit=4096'
    );
    expect(requests[1].url).toBe(
      'http://hub.example/user/ana/jupyter-to-job/api/parameters?path=a%20b.ipynb'
    );
  });

  it('saves an output into the user’s files with a POST', async () => {
    const { api, requests } = fakeServer(() =>
      json({ path: 'job-outputs/train-3f2a1b4c.ipynb', size: 10 }, 201)
    );
    const saved = await api.saveOutput('j', 'ipynb', {
      path: 'job-outputs/train-3f2a1b4c.ipynb',
      overwrite: false
    });
    expect(saved.path).toBe('job-outputs/train-3f2a1b4c.ipynb');
    expect(requests[0].url).toBe(
      'http://hub.example/user/ana/jupyter-to-job/api/jobs/j/outputs/ipynb/save'
    );
  });

  it('throws the server’s sentence and reason on an error answer', async () => {
    const { api } = fakeServer(() =>
      json(
        {
          message: 'The flavor "a100" is not open to you.',
          reason: 'flavor-forbidden'
        },
        403
      )
    );
    const failure = api.createJob({ input_path: 'a.ipynb' });
    await expect(failure).rejects.toBeInstanceOf(JobAPIError);
    await expect(failure).rejects.toMatchObject({
      message: 'The flavor "a100" is not open to you.',
      reason: 'flavor-forbidden',
      status: 403
    });
  });

  it('does not show an HTML error page as the message', async () => {
    const { api } = fakeServer(
      () =>
        new Response('<html><body>404 : Not Found</body></html>', {
          status: 404,
          statusText: 'Not Found'
        })
    );
    await expect(api.getConfig()).rejects.toMatchObject({
      message: 'The server answered 404 Not Found.',
      reason: null,
      status: 404
    });
  });
});

describe('answers in either shape', () => {
  it('reads flavors wrapped or bare', () => {
    const flavor = makeFlavor();
    expect(flavorsFrom({ flavors: [flavor] })).toEqual([flavor]);
    expect(flavorsFrom([flavor])).toEqual([flavor]);
    expect(flavorsFrom({ flavors: [] })).toEqual([]);
  });

  it('refuses a flavor answer that is no flavor list, rather than reading it as none', () => {
    expect(() => flavorsFrom({})).toThrow(UNREADABLE_FLAVORS);
    expect(() => flavorsFrom(null)).toThrow(UNREADABLE_FLAVORS);
    expect(() => flavorsFrom('<html>Sign in</html>')).toThrow(
      UNREADABLE_FLAVORS
    );
  });

  it('reads parameters wrapped or bare', () => {
    const lr = {
      name: 'lr',
      default: '0.1',
      inferred_type_name: 'None',
      help: ''
    };
    expect(parametersFrom({ path: 'a.ipynb', parameters: [lr] })).toEqual([lr]);
    expect(parametersFrom([lr])).toEqual([lr]);
    expect(parametersFrom('oops')).toEqual([]);
  });

  it('reads a created job from a CreateJobResponse or a bare DescribeJob', () => {
    const job = makeJob();
    expect(createdJobFrom({ job_id: job.job_id, created: false, job })).toBe(
      job
    );
    expect(createdJobFrom(job)).toBe(job);
  });

  it('refuses a create answer that describes no job', () => {
    expect(() => createdJobFrom(undefined)).toThrow(UNREADABLE_JOB);
    expect(() => createdJobFrom({ created: true })).toThrow(UNREADABLE_JOB);
    expect(() => createdJobFrom('<html>Sign in</html>')).toThrow(
      UNREADABLE_JOB
    );
  });

  it('fills the features a config leaves out with the defaults', () => {
    expect(featuresOf(null).stop).toBe(true);
    expect(featuresOf(null).save_outputs).toBe(false);
    const features = featuresOf({
      features: { html_output: false } as any
    });
    expect(features.html_output).toBe(false);
    expect(features.parameters).toBe(true);
  });
});
