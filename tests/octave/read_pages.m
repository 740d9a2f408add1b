function a = read_pages(file, width, pages)
%READ_PAGES  A row-major float64 file of PAGES matrices of equal size (numpy: an (pages, rows,
%   width) array's tofile) as a rows x width x pages array.
fid = fopen(file, 'r');
v = fread(fid, Inf, 'double', 0, 'ieee-le');
fclose(fid);
a = permute(reshape(v, width, [], pages), [2 1 3]);   % each page's memory is that of its transpose
end
