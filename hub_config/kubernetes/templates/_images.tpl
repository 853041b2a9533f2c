{{- /*
  The images come from one place, values.yaml's hub.image and singleuser.image: built from
  this repository and pushed to the admin's registry (README.md, "Build and push the
  images"). Installing before that would leave every pod unable to pull; refuse instead,
  with what to do.
*/ -}}
{{- define "campus-gpu-hub.checkImages" -}}
{{- $hub := .Values.hub.image -}}
{{- $user := .Values.singleuser.image -}}
{{- if or (hasPrefix "REGISTRY/" $hub.name) (hasPrefix "REGISTRY/" $user.name) -}}
{{- fail "values.yaml still names the images REGISTRY/campus-gpu-hub/hub and REGISTRY/campus-gpu-hub/user. Build both images, push them to your registry (README.md, \"Build and push the images\") and put your registry in hub.image.name and singleuser.image.name, then install again." -}}
{{- end -}}
{{- if ne (dir $hub.name) (dir $user.name) -}}
{{- fail (printf "values.yaml names the hub image %s and the user image %s: they are built and pushed together, so put both in the same registry folder (hub.image.name and singleuser.image.name), then install again." $hub.name $user.name) -}}
{{- end -}}
{{- if ne (toString $hub.tag) (toString $user.tag) -}}
{{- fail (printf "values.yaml tags the hub image %s and the user image %s: they are built from the same source, so give both the same tag (hub.image.tag and singleuser.image.tag), then install again." (toString $hub.tag) (toString $user.tag)) -}}
{{- end -}}
{{- end -}}
